// AtomicFile: a unique temporary file beside the target, written in full, fsync'd, renamed over the
// target, the folder fsync'd; a stream target (/dev/null, a FIFO, /dev/stdout) written in place.
#include "yolocu/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "yolocu/error.hpp"

namespace yolocu {
namespace {

[[noreturn]] void throw_io(const std::string& path, const std::string& what, int err) {
  throw Error(ErrorCode::kIo, path + ": " + what + ": " + std::strerror(err));
}

// "<path>.tmp-XXXXXXXX" with 8 random letters: the folder is the target's (rename stays within
// one file system), the name ends nowhere near the target's extension (no glob matches it).
std::string temp_name(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng(std::random_device{}() ^ (static_cast<uint64_t>(::getpid()) << 20) ^ counter++);
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s = path + ".tmp-";
  for (int i = 0; i < 8; ++i) s += kChars[rng() % (sizeof kChars - 1)];
  return s;
}

bool is_stream(mode_t m) { return S_ISCHR(m) || S_ISFIFO(m) || S_ISSOCK(m); }

// The system's own links to streams (/dev/stdout, /dev/fd/N, /proc/self/fd/N), as opposed to a link
// planted in a user's folder, which is replaced and never written through.
bool system_link(const std::string& path) { return path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0; }

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) throw Error(ErrorCode::kInvalidArgument, "AtomicFile: empty path");
  if (open_stream()) return;
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_ = temp_name(path_);
    // O_EXCL: a name that exists (a file, a planted link) is never opened; 0666 less the umask.
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST) break;
  }
  const int err = errno;
  temp_.clear();
  throw_io(path_, "cannot create a file in its folder", err);
}

// A target that is a stream, not a file (a character device such as /dev/null or a terminal, a FIFO,
// a socket; itself or through a system link): written in place, since renaming a file over it would
// replace the device. A block device is refused. False for anything else (a file, a folder, nothing).
bool AtomicFile::open_stream() {
  struct stat st{};
  if (::lstat(path_.c_str(), &st) != 0) return false;
  if (S_ISBLK(st.st_mode)) throw Error(ErrorCode::kIo, path_ + ": cannot write: it is a block device");
  bool stream = is_stream(st.st_mode);
  if (!stream && S_ISLNK(st.st_mode) && system_link(path_)) {
    struct stat target{};
    stream = ::stat(path_.c_str(), &target) == 0 && is_stream(target.st_mode);
  }
  if (!stream) return false;
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd_ < 0) throw_io(path_, "cannot open", errno);
  stream_ = true;
  return true;
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

void AtomicFile::fail(int err) {
  discard();
  throw_io(path_, "cannot write", err);
}

void AtomicFile::write(const void* data, size_t size) {
  if (fd_ < 0) throw Error(ErrorCode::kIo, path_ + ": cannot write: the file was already closed");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(n < 0 ? errno : ENOSPC);  // 0 bytes for a non-empty write: no room left
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw Error(ErrorCode::kIo, path_ + ": cannot write: the file was already closed");
  if (stream_) {  // nothing to rename or flush to disk: the bytes went straight to the stream
    const int fd = fd_;
    fd_ = -1;
    committed_ = true;
    if (::close(fd) != 0 && errno != EINTR) throw_io(path_, "cannot write", errno);
    return;
  }
  if (::fsync(fd_) != 0 && errno != EINVAL && errno != EROFS) fail(errno);  // EINVAL: a file system without fsync
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && errno != EINTR) fail(errno);  // NFS reports a failed write-back at close
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    if (err == EISDIR) {
      discard();
      throw Error(ErrorCode::kIo, path_ + ": cannot write: it is a folder");
    }
    fail(err);
  }
  committed_ = true;
  temp_.clear();
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  const int dir = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {  // the rename itself on disk; a folder that cannot be synced still holds the file
    ::fsync(dir);
    ::close(dir);
  }
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

}  // namespace yolocu
