// The bodies of yolocu's fuzz harnesses: one function per entry point that takes user bytes.
// The libFuzzer binaries (fuzz_*.cpp, YOLOCU_FUZZ=ON) call them on every input, and the normal test
// suite replays the seed corpora and every crash ever found through them (tests/fuzz). Each one
// swallows yolocu::Error, the library's one documented failure; anything else that escapes
// (another exception type, a sanitizer report, a crash) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace yolocu::fuzz {

// Memory budget of the harnesses (CpuEngineOptions::max_memory and the plan's), far below
// libFuzzer's 2 GiB malloc limit: an allocation above it that the budget did not refuse is a bug.
constexpr uint64_t kMaxMemory = uint64_t{64} << 20;

// ONNX model bytes: parse_onnx, model_info, check_detection_model, then for small enough inputs
// the plan (shape inference + constant folding), the GPU engine's host-side step planner, and the
// CPU engine: prepare and one forward pass on zeros.
void onnx_model(const uint8_t* data, size_t size);

// Image bytes: decode_image (JPEG with EXIF orientation, PNG of every colour type) under small
// DecodeLimits, then a letterbox of the result to a 64 x 48 input.
void image(const uint8_t* data, size_t size);

// .npy bytes (parse_npy), or an .npz archive (parse_npz) when they start with the zip magic "PK".
void npy(const uint8_t* data, size_t size);

// A YOLO label file: the first 4 bytes choose the image size (width, height: 1..4096), the rest is
// the text for parse_yolo_labels; its boxes then go through MapEvaluator as detections and labels.
void labels(const uint8_t* data, size_t size);

// A GPU tactic cache file (JSON, host-only code): TacticCache::load of the bytes, then a save that
// merges an entry into them and must give a file that loads with that entry (a save never writes
// a file the next load refuses), and a second device's save beside it.
void tactic_cache(const uint8_t* data, size_t size);

// Video bytes (held in a memfd, opened by FFmpeg's file protocol as a file source is): the file
// source's format whitelist, demux, decode and BGR conversion of up to 8 frames under small
// DecodeLimits (targets_io.cpp). A delivered frame must be within the limits.
void video(const uint8_t* data, size_t size);

// A source list file (--source list.txt): read_source_list, then per line classify_source,
// redact_source (redacting twice must change nothing), url_host, input_policy and url_allowed (a
// network source's policy must refuse another host).
void source_list(const uint8_t* data, size_t size);

// The Triton backend's request handling, without a server: byte 0 bit 0 set: the rest is the model
// configuration JSON (parse_backend_config, detector_options); clear: byte 1 is the element count
// of an IMAGE tensor, the rest its bytes (split_bytes_tensor, each image decoded under small
// limits, client_message of every error).
void triton_request(const uint8_t* data, size_t size);

// The harness named `name` ("onnx", "image", "npy", "labels", "tactic_cache", "video",
// "source_list", "triton_request"), nullptr for another name.
using Target = void (*)(const uint8_t*, size_t);
Target target(const std::string& name);

}  // namespace yolocu::fuzz
