// The harness bodies of the inputs that come over I/O rather than as files of one format: a video
// (FFmpeg demux + decode + BGR conversion, the bytes held in memory), a source list (the list
// reader and the URL policy of every line), and a Triton request (the IMAGE tensor's framing and
// images, the model configuration). See targets.hpp.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "targets.hpp"
#include "triton/backend_config.hpp"
#include "triton/tensors.hpp"
#include "video/input_policy.hpp"
#include "yolocu/error.hpp"
#include "yolocu/image.hpp"
#include "yolocu/video.hpp"

namespace yolocu::fuzz {
namespace {

// An in-memory file (memfd) holding `data`, named by its /proc path: what FFmpeg's file protocol
// and the list reader open. One per process, rewritten for each input.
const std::string& memory_file(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("yolocu-fuzz", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) __builtin_trap();
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) __builtin_trap();
    done += static_cast<size_t>(n);
  }
  return path;
}

}  // namespace

void video(const uint8_t* data, size_t size) {
  if (!video_input_supported()) return;
  VideoSourceOptions o;
  o.backend = DecodeBackend::kCpu;
  o.limits.max_width = o.limits.max_height = 2048;
  o.limits.max_pixels = int64_t{1} << 20;
  o.max_frames = 8;
  o.decoder_threads = 1;
  o.open_timeout_s = o.read_timeout_s = 5;
  try {
    const auto source = FrameSource::open(memory_file(data, size), o);
    VideoFrame frame;
    for (int i = 0; i < 8 && source->read(frame); ++i) {
      // a delivered frame is within the limits and holds its pixels
      if (frame.width() <= 0 || frame.height() <= 0 || int64_t{frame.width()} * frame.height() > o.limits.max_pixels)
        __builtin_trap();
      if (frame.image.width() != frame.width() || frame.image.height() != frame.height()) __builtin_trap();
    }
  } catch (const Error&) {
  }
}

void source_list(const uint8_t* data, size_t size) {
  std::vector<std::string> sources;
  try {
    sources = read_source_list(memory_file(data, size));
  } catch (const Error&) {
    return;
  }
  for (const std::string& s : sources) {
    const std::string shown = redact_source(s);
    if (redact_source(shown) != shown) __builtin_trap();  // redacting twice changes nothing
    video::url_host(s);
    try {
      const video::InputPolicy policy = video::input_policy(s, classify_source(s));
      std::string why;
      // the source itself, and the URL a playlist of it might name on another host
      video::url_allowed(policy, s, &why);
      const std::string other = policy.host.find("elsewhere") == std::string::npos ? "elsewhere.invalid" : "other.invalid";
      if (!policy.host.empty() && video::url_allowed(policy, "http://" + other + "/x.ts", &why)) __builtin_trap();
    } catch (const Error&) {
    }
  }
}

void triton_request(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const uint8_t mode = data[0], count = data[1];
  data += 2, size -= 2;
  if (mode & 1) {  // the model configuration JSON Triton hands the backend
    try {
      const triton::BackendConfig c = triton::parse_backend_config(std::string(reinterpret_cast<const char*>(data), size));
      triton::detector_options(c, (mode & 2) != 0, 0, (mode & 4) != 0);
    } catch (const Error& e) {
      triton::client_message(e.what());
    }
    return;
  }
  // an IMAGE tensor of `count` elements: framing, then each image decoded as the detector would
  // under small limits; the error a client would read
  DecodeLimits limits;
  limits.max_width = limits.max_height = 2048;
  limits.max_pixels = int64_t{1} << 20;
  try {
    const std::vector<triton::ByteItem> items = triton::split_bytes_tensor(data, size, count);
    if (items.size() != count) __builtin_trap();
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].data < data || items[i].data + items[i].size > data + size) __builtin_trap();
      try {
        decode_image(items[i].data, items[i].size, limits, "IMAGE[" + std::to_string(i) + "]");
      } catch (const Error& e) {
        const std::string m = triton::client_message(e.what());
        if (m.size() > 240 || m.find('\n') != std::string::npos) __builtin_trap();
      }
    }
  } catch (const Error& e) {
    triton::client_message(e.what());
  }
}

}  // namespace yolocu::fuzz
