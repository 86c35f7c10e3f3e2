// AtomicFile (yolocu/atomic_file.hpp): the target changes only at commit(), whole; a failed write
// names the target and the system's reason and removes the temporary file; a link at the target is
// replaced, not followed. The CLI's outputs on a full disk: tests/cli/test_cli_outputs.cpp.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <iterator>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_util.hpp"
#include "yolocu/atomic_file.hpp"
#include "yolocu/error.hpp"

namespace yolocu {
namespace {
namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

size_t files_in(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file() || e.is_symlink();
  return n;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = test::scratch_dir("atomic_file/" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(AtomicFile, TargetChangesOnlyAtCommit) {
  const std::string dir = fresh_dir("commit");
  const std::string path = dir + "/out.txt";
  std::ofstream(path) << "old";
  {
    AtomicFile f(path);
    f.write("new ");
    f.write("text");
    EXPECT_EQ(slurp(path), "old");
    EXPECT_EQ(slurp(f.temp_path()), "new text");
    EXPECT_EQ(fs::path(f.temp_path()).parent_path(), fs::path(path).parent_path());
    f.commit();
  }
  EXPECT_EQ(slurp(path), "new text");
  EXPECT_EQ(files_in(dir), 1u);
  {
    AtomicFile f(path);  // destroyed without commit(): the temporary file goes, the target stays
    f.write("abandoned");
  }
  EXPECT_EQ(slurp(path), "new text");
  EXPECT_EQ(files_in(dir), 1u);
}

TEST(AtomicFile, ReplacesALinkWithoutWritingThroughIt) {
  const std::string dir = fresh_dir("link");
  std::ofstream(dir + "/victim") << "not yours";
  fs::create_symlink(dir + "/victim", dir + "/out");
  write_file_atomic(dir + "/out", "mine");
  EXPECT_FALSE(fs::is_symlink(fs::symlink_status(dir + "/out")));
  EXPECT_EQ(slurp(dir + "/out"), "mine");
  EXPECT_EQ(slurp(dir + "/victim"), "not yours");
}

// A stream target is written in place: /dev/null stays the device (a file renamed over it, as root,
// replaced the device with a regular file), a FIFO stays a FIFO and its reader gets the bytes.
TEST(AtomicFile, WritesStreamsInPlace) {
  struct stat st{};
  write_file_atomic("/dev/null", "discarded");
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null is no longer a character device";
  const std::string dir = fresh_dir("fifo");
  const std::string fifo = dir + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // (a reader first: the writer's open returns)
  ASSERT_GE(reader, 0);
  write_file_atomic(fifo, "through the pipe");
  char buf[64] = {};
  const ssize_t n = ::read(reader, buf, sizeof buf);
  ::close(reader);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "through the pipe");
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);  // no temporary file beside it
}

// A link planted in a user's folder is replaced even when it leads to a stream: never written through.
TEST(AtomicFile, ReplacesAPlantedLinkToAStream) {
  const std::string dir = fresh_dir("link_to_fifo");
  ASSERT_EQ(::mkfifo((dir + "/pipe").c_str(), 0600), 0);
  fs::create_symlink(dir + "/pipe", dir + "/out");
  write_file_atomic(dir + "/out", "mine");  // (opening the FIFO would block here: it has no reader)
  EXPECT_FALSE(fs::is_symlink(fs::symlink_status(dir + "/out")));
  EXPECT_EQ(slurp(dir + "/out"), "mine");
  struct stat st{};
  ASSERT_EQ(::lstat((dir + "/pipe").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST(AtomicFile, ErrorsNameTheTargetAndTheReason) {
  const std::string dir = fresh_dir("errors");
  std::string message;
  EXPECT_EQ(test::code_of([&] { AtomicFile f(dir + "/no/such/folder/x.json"); }, &message), ErrorCode::kIo);
  EXPECT_NE(message.find("x.json: cannot create a file in its folder: No such file or directory"), std::string::npos)
      << message;
  fs::create_directories(dir + "/a_folder");
  EXPECT_EQ(test::code_of([&] { write_file_atomic(dir + "/a_folder", "x"); }, &message), ErrorCode::kIo);
  EXPECT_NE(message.find("a_folder: cannot write: it is a folder"), std::string::npos) << message;
  EXPECT_EQ(files_in(dir), 0u);
}

// A write past RLIMIT_FSIZE (SIGXFSZ ignored: the write fails with EFBIG) in a forked child: the
// message, the previous file kept, no temporary file left.
TEST(AtomicFile, FullDiskKeepsThePreviousFile) {
  const std::string dir = fresh_dir("full");
  const std::string path = dir + "/big.bin";
  std::ofstream(path) << "previous";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit rl{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    std::string message = "no error";
    try {
      write_file_atomic(path, std::string(10000, 'x'));
    } catch (const Error& e) {
      message = e.what();
    }
    (void)!::write(fds[1], message.data(), message.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) message.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  EXPECT_EQ(message, path + ": cannot write: File too large");
  EXPECT_EQ(slurp(path), "previous");
  EXPECT_EQ(files_in(dir), 1u);
}

}  // namespace
}  // namespace yolocu
