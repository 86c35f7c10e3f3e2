// yolocu/atomic_file.hpp - output files that are complete or absent, never half written.
//
// Every file yolocu writes (the CLI's JSON, JSON lines, labels, images, .npy, videos, the tactic
// cache) goes through AtomicFile: the bytes go to a temporary file of a unique name in the target's
// folder (created with O_EXCL, so never through a planted link); commit() flushes it to disk
// (fsync), renames it over the target and fsyncs the folder. Until commit() the previous file at
// the target stays as it was; a failed write, or an AtomicFile destroyed without commit(), removes
// the temporary file. rename() replaces a symbolic link at the target path; it never writes
// through it. The new file gets 0666 less the umask, like any created file.
// A target that is a stream rather than a file is written in place instead (no temporary file, no
// rename, which would replace the device with a file): a character device (/dev/null, a terminal),
// a FIFO or a socket, named directly or through the system's own links (/dev/stdout, /dev/fd/N,
// /proc/self/fd/N). A block device is refused (kIo "it is a block device").
//
// Errors: kIo "<target path>: cannot write: <the system's reason>" (ENOSPC "No space left on
// device", EFBIG "File too large", EACCES, EROFS, EDQUOT, ...), naming the target, not the
// temporary name. Host only; one AtomicFile is used by one thread at a time.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace yolocu {

class AtomicFile {
 public:
  // Creates the temporary file beside `path` (the folder must exist); kIo when it cannot.
  explicit AtomicFile(std::string path);
  ~AtomicFile();  // an uncommitted file is removed; the target is left as it was
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Writes every byte or throws kIo (the temporary file is then removed; later calls throw too).
  void write(const void* data, size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // fsync, rename over the target, fsync of the folder; kIo on failure (target unchanged).
  void commit();

  const std::string& path() const noexcept { return path_; }
  const std::string& temp_path() const noexcept { return temp_; }
  int fd() const noexcept { return fd_; }  // the temporary file's (or stream's) descriptor, -1 once closed
  // For writers that go through another library (FFmpeg's AVIO): records that a write of theirs on
  // fd() failed with `err` (an errno value); kIo naming the target and strerror(err).
  [[noreturn]] void fail(int err);

 private:
  bool open_stream();
  void discard() noexcept;
  std::string path_, temp_;
  int fd_ = -1;
  bool committed_ = false;
  bool stream_ = false;  // the target is a stream, written in place
};

// A whole file in one call: AtomicFile(path), write(bytes), commit().
void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace yolocu
