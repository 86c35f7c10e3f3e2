#include "video/video_test_util.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace yolocu::test {

std::string video_dir() {
  const char* env = std::getenv("YOLOCU_VIDEO_DIR");
  return env && *env ? env : source_dir() + "/.data/video/refs";
}

std::string video_file(const std::string& name) {
  struct stat st;
  const std::string done = video_dir() + "/COMPLETE", p = video_dir() + "/" + name;
  return stat(done.c_str(), &st) == 0 && stat(p.c_str(), &st) == 0 ? p : std::string();
}

std::string video_detections_unavailable() {
  std::ifstream f(video_dir() + "/DETECTIONS_UNAVAILABLE");
  if (!f.is_open()) return "";
  std::string why;
  std::getline(f, why);
  return why.empty() ? std::string("DETECTIONS_UNAVAILABLE") : why;
}

bool video_required() {
  const char* env = std::getenv("YOLOCU_REQUIRE_VIDEO");
  return env && *env && std::string(env) != "0";
}

std::vector<VideoFrame> read_all(const std::string& source, const VideoSourceOptions& options) {
  auto src = FrameSource::open(source, options);
  std::vector<VideoFrame> out;
  VideoFrame f;
  while (src->read(f)) {
    out.push_back(std::move(f));
    f = VideoFrame();
  }
  return out;
}

::testing::AssertionResult same_pixels(const Tensor& frames, int64_t k, const VideoFrame& frame) {
  if (frames.rank() != 4 || k >= frames.dim(0))
    return ::testing::AssertionFailure() << "reference has no frame " << k;
  const int64_t h = frames.dim(1), w = frames.dim(2);
  if (frame.height() != h || frame.width() != w)
    return ::testing::AssertionFailure() << "frame " << k << " is " << frame.width() << "x" << frame.height()
                                         << ", cv2.VideoCapture's " << w << "x" << h;
  const size_t n = static_cast<size_t>(h * w * 3);
  const uint8_t* ref = frames.data_as<uint8_t>() + static_cast<size_t>(k) * n;
  const uint8_t* got = frame.image.data();
  if (std::memcmp(ref, got, n) == 0) return ::testing::AssertionSuccess();
  size_t first = n, count = 0;
  for (size_t i = 0; i < n; ++i)
    if (ref[i] != got[i]) {
      if (first == n) first = i;
      ++count;
    }
  return ::testing::AssertionFailure() << "frame " << k << ": " << count << " of " << n
                                       << " bytes differ from cv2.VideoCapture's; first at pixel ("
                                       << (first / 3) % static_cast<size_t>(w) << ", " << first / 3 / static_cast<size_t>(w)
                                       << ") channel " << first % 3 << ": " << int(got[first]) << " vs "
                                       << int(ref[first]);
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

LocalHttpServer::LocalHttpServer(std::string body, long stall_after) : body_(std::move(body)), stall_after_(stall_after) {
  start();
}

LocalHttpServer::LocalHttpServer(std::map<std::string, std::string> files)
    : stall_after_(-1), files_(std::move(files)), by_name_(true) {
  start();
}

std::vector<std::string> LocalHttpServer::requests() const {
  std::lock_guard<std::mutex> lock(requests_mu_);
  return requests_;
}

void LocalHttpServer::start() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, 8) != 0)
    throw std::runtime_error("LocalHttpServer: cannot listen on 127.0.0.1");
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { serve(); });
}

LocalHttpServer::~LocalHttpServer() {
  stop_.store(true);
  thread_.join();
  for (auto& t : handlers_) t.join();
  ::close(listen_fd_);
}

std::string LocalHttpServer::url(const std::string& name) const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/" + name;
}

void LocalHttpServer::serve() {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(kLifetimeS);
  while (!stop_.load() && connections_.load() < kMaxRequests && std::chrono::steady_clock::now() < end) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    connections_++;
    handlers_.emplace_back([this, fd] { handle(fd); });
  }
}

void LocalHttpServer::handle(int fd) {
  std::string req;
  char buf[4096];
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (req.find("\r\n\r\n") == std::string::npos && !stop_.load() && std::chrono::steady_clock::now() < give_up) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    req.append(buf, static_cast<size_t>(n));
  }
  std::string body = body_, status = "200 OK";
  if (by_name_) {
    const size_t sp = req.find(' '), sp2 = sp == std::string::npos ? sp : req.find(' ', sp + 1);
    const std::string path = sp2 == std::string::npos ? "" : req.substr(sp + 1, sp2 - sp - 1);
    std::string host;
    const size_t h = req.find("\r\nHost: ");
    if (h != std::string::npos) host = req.substr(h + 8, req.find("\r\n", h + 8) - h - 8);
    {
      std::lock_guard<std::mutex> lock(requests_mu_);
      requests_.push_back("GET " + path + " host=" + host);
    }
    const auto it = path.empty() ? files_.end() : files_.find(path.substr(1));
    body = it == files_.end() ? std::string() : it->second;
    if (it == files_.end()) status = "404 Not Found";
  }
  // the whole body's length even when stalling; no Accept-Ranges: FFmpeg reads it as an unseekable stream
  const std::string head = "HTTP/1.1 " + status + "\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  const size_t limit = stall_after_ >= 0 ? std::min(body.size(), static_cast<size_t>(stall_after_)) : body.size();
  std::string out = head + body.substr(0, limit);
  size_t sent = 0;
  while (sent < out.size() && !stop_.load()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  // hold the connection, send nothing, until the server stops (whatever the client does meanwhile)
  while (stall_after_ >= 0 && !stop_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::close(fd);
}

int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace yolocu::test
