// RawSource over still images: a folder (its .jpg/.jpeg/.png files, sorted by name), a glob
// pattern (sorted matches), a printf pattern (img_%05d.jpg: numbers from 0 or 1 up to the first
// missing one, as FFmpeg's image2 demuxer) or one image. Frames are decoded by decode_image_file
// (cv::imread's twin, as ultralytics reads images); skipped frames are not decoded at all.
#include <glob.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <mutex>

#include "core/check.hpp"
#include "video/source_impl.hpp"

namespace yolocu::video {
namespace fs = std::filesystem;
namespace {

bool is_image_name(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e == ".jpg" || e == ".jpeg" || e == ".png";
}

std::string format_number(const std::string& pattern, int64_t n) {
  char buf[4096];
  std::snprintf(buf, sizeof buf, pattern.c_str(), static_cast<int>(n));  // NOLINT: pattern checked by the caller
  return buf;
}

// "%05d" -> true when the only conversion is one %[0-9]*d (and %% escapes).
bool single_number_conversion(const std::string& s) {
  int conversions = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') continue;
    if (i + 1 < s.size() && s[i + 1] == '%') {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    if (j >= s.size() || s[j] != 'd') return false;
    ++conversions;
    i = j;
  }
  return conversions == 1;
}

std::vector<std::string> list_images(const std::string& source) {
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_directory(source, ec)) {
    for (const auto& e : fs::directory_iterator(source, ec))
      if (e.is_regular_file() && is_image_name(e.path())) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    YOLOCU_CHECK(!files.empty(), kIo, source, ": no .jpg/.jpeg/.png images in this folder");
    return files;
  }
  if (source.find('%') != std::string::npos && single_number_conversion(source)) {
    int64_t n = fs::exists(format_number(source, 0), ec) ? 0 : 1;
    for (; n < 100000000; ++n) {
      std::string f = format_number(source, n);
      if (!fs::exists(f, ec)) break;
      files.push_back(std::move(f));
    }
    YOLOCU_CHECK(!files.empty(), kIo, source, ": no image matches this pattern (numbers from 0 or 1)");
    return files;
  }
  if (source.find_first_of("*?[") != std::string::npos) {
    glob_t g{};
    const int r = glob(source.c_str(), 0, nullptr, &g);
    for (size_t i = 0; r == 0 && i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
    globfree(&g);
    std::sort(files.begin(), files.end());
    YOLOCU_CHECK(!files.empty(), kIo, source, ": no file matches this pattern");
    return files;
  }
  YOLOCU_CHECK(fs::exists(source, ec), kIo, source, ": no such file");
  files.push_back(source);
  return files;
}

class ImageSequence final : public RawSource {
 public:
  ImageSequence(const std::string& source, const VideoSourceOptions& options)
      : files_(list_images(source)), options_(options) {
    info_.source = source;
    info_.kind = SourceKind::kImageSequence;
    info_.fps = options.sequence_fps > 0 ? options.sequence_fps : 0;
    info_.frame_count = static_cast<int64_t>(files_.size());
    info_.codec = "jpeg/png";
    info_.decoder = "cpu: decode_image_file (cv::imread's twin)";
  }

  bool next(VideoFrame& frame, bool pixels) override {
    if (interrupted_.load() || (options_.cancel && options_.cancel->load()) || next_ >= files_.size()) return false;
    const size_t i = next_++;
    frame.index = static_cast<int64_t>(i);
    frame.pts = options_.sequence_fps > 0 ? static_cast<double>(i) / options_.sequence_fps : std::nan("");
    frame.format = FrameFormat::kBgr24;
    frame.location = MemoryLocation::kHost;
    if (pixels) {
      frame.image = decode_image_file(files_[i], options_.limits);  // throws kIo / kParse naming the file
      if (info_.width == 0) {
        info_.width = frame.image.width();
        info_.height = frame.image.height();
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    ++decoded_;
    return true;
  }

  const SourceInfo& info() const noexcept override { return info_; }
  SourceStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    SourceStats s;
    s.decoded = decoded_;
    return s;
  }
  void interrupt() noexcept override { interrupted_.store(true); }

 private:
  std::vector<std::string> files_;
  VideoSourceOptions options_;
  SourceInfo info_;
  size_t next_ = 0;
  std::atomic<bool> interrupted_{false};
  mutable std::mutex mu_;
  int64_t decoded_ = 0;
};

}  // namespace

std::unique_ptr<RawSource> open_image_sequence(const std::string& source, const VideoSourceOptions& options) {
  return std::make_unique<ImageSequence>(source, options);
}

}  // namespace yolocu::video
