// Helpers of the video tests: the generated test material (scripts/video/make_refs.sh), a local
// HTTP server on 127.0.0.1, and frame comparisons.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "yolocu/tensor.hpp"
#include "yolocu/video.hpp"

namespace yolocu::test {

// The folder scripts/video/make_refs.sh writes: $YOLOCU_VIDEO_DIR if set, else <source>/.data/video/refs.
std::string video_dir();
// A file there; empty when absent or when the folder is incomplete (no COMPLETE).
std::string video_file(const std::string& name);
// $YOLOCU_REQUIRE_VIDEO set (scripts/test.sh made the material): a missing file fails the test.
bool video_required();
// Why make_refs.sh made no detection references ("" when it made them).
std::string video_detections_unavailable();

// Every frame of `source` through FrameSource (options as given).
std::vector<VideoFrame> read_all(const std::string& source, const VideoSourceOptions& options = {});

// Frame k of an N x H x W x 3 uint8 tensor equals `frame` byte for byte; on a mismatch, the message
// names the first differing pixel and how many bytes differ.
::testing::AssertionResult same_pixels(const Tensor& frames, int64_t k, const VideoFrame& frame);

// Reads a whole file / writes one.
std::string read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::string& bytes);

// A one-file HTTP/1.1 server on 127.0.0.1 (a kernel-chosen port) for network-source tests. Every
// GET gets `body` with its Content-Length, "Connection: close" and no Accept-Ranges (an unseekable
// stream). With
// stall_after >= 0 it sends only that many bytes and then holds the connection open, sending
// nothing, until the server stops (a camera that stopped sending). Bounded: it stops in its
// destructor, and every wait inside polls the stop flag.
//
// With `files` instead, GET /<name> serves files[name] (404 for others), and every request's path and
// Host header are recorded (requests()). Either way it answers at most kMaxRequests connections and
// stops accepting after kLifetimeS seconds.
class LocalHttpServer {
 public:
  static constexpr int kMaxRequests = 64;
  static constexpr int kLifetimeS = 60;
  explicit LocalHttpServer(std::string body, long stall_after = -1);
  explicit LocalHttpServer(std::map<std::string, std::string> files);
  ~LocalHttpServer();
  std::string url(const std::string& name = "clip.mp4") const;
  int port() const { return port_; }
  int connections() const { return connections_.load(); }
  // "GET /path host=<Host header>" per request so far.
  std::vector<std::string> requests() const;

 private:
  void start();
  void serve();
  void handle(int fd);
  std::string body_;
  long stall_after_;
  std::map<std::string, std::string> files_;
  bool by_name_ = false;
  mutable std::mutex requests_mu_;
  std::vector<std::string> requests_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
  std::vector<std::thread> handlers_;
};

// A 127.0.0.1 port nothing listens on (bound, then closed): connections are refused.
int closed_port();

}  // namespace yolocu::test

// Skips (visibly) when a generated video file is missing; fails instead under YOLOCU_REQUIRE_VIDEO,
// except for the detection references (refs_*) when make_refs.sh could not make them (no v7.0 tree:
// DETECTIONS_UNAVAILABLE says why), which skip with that reason.
#define YOLOCU_REQUIRE_VIDEO(var, name)                                                                 \
  const std::string var = ::yolocu::test::video_file(name);                                           \
  if (var.empty() && std::string(name).rfind("refs_", 0) == 0 &&                                      \
      !::yolocu::test::video_detections_unavailable().empty())                                        \
    GTEST_SKIP() << "no ultralytics detection references: " << ::yolocu::test::video_detections_unavailable(); \
  if (var.empty()) {                                                                                  \
    if (::yolocu::test::video_required())                                                             \
      FAIL() << "YOLOCU_REQUIRE_VIDEO: test material missing: " << ::yolocu::test::video_dir() << "/" << name; \
    GTEST_SKIP() << "video test material not found (run scripts/video/make_refs.sh): "                \
                 << ::yolocu::test::video_dir() << "/" << name;                                       \
  }
