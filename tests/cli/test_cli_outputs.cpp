// Every output kind of the CLI on a full disk, through a planted symbolic link and twice under one
// name: detect --json, --save-txt, --save-img, --dump, --source --jsonl and --save, infer's .npy,
// eval --json. The full disk is RLIMIT_FSIZE in the forked child (a write past the limit fails with
// EFBIG; yolocu ignores SIGXFSZ itself, so the test leaves the signal as it is): the run must exit
// 1 naming the file and "File too large", leave the previous complete file in place and no
// temporary file behind.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "cli/cli_test_util.hpp"
#include "onnx_builder.hpp"
#include "yolocu/npy.hpp"
#include "yolocu/video.hpp"

namespace yolocu::test {
namespace {
namespace fs = std::filesystem;

struct Outcome {
  int rc = -1;
  std::string out;  // stdout and stderr
};

// `yolocu <args>` in a forked child under RLIMIT_FSIZE `limit` bytes (0: none).
Outcome run_with_file_limit(const std::string& args, rlim_t limit) {
  const std::string cmd = yolocu_command(args);
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    if (limit) {
      const rlimit rl{limit, limit};
      ::setrlimit(RLIMIT_FSIZE, &rl);
    }
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  Outcome r;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) r.out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

void put(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// No "<name>.tmp-XXXXXXXX" left anywhere under `dir`.
void expect_no_temp_files(const std::string& dir) {
  for (const auto& e : fs::recursive_directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

// A full disk for `args`: exit 1, the file and the system's reason named, `target` as it was.
void expect_full_disk_refused(const std::string& args, const std::string& target, rlim_t limit) {
  const std::string previous = "previous complete file\n";
  put(target, previous);
  const Outcome r = run_with_file_limit(args, limit);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(fs::path(target).filename().string() + ": cannot write: File too large"), std::string::npos)
      << r.out;
  EXPECT_EQ(slurp(target), previous);
  expect_no_temp_files(fs::path(target).parent_path().string());
}

// A symbolic link planted at `target` pointing at a victim file: the run replaces the link with
// its own file and the victim keeps its bytes.
void expect_link_replaced(const std::string& args, const std::string& target) {
  const std::string victim = fs::path(target).parent_path().parent_path().string() + "/victim.txt";
  put(victim, "not yours\n");
  fs::create_directories(fs::path(target).parent_path());
  fs::remove(target);
  fs::create_symlink(victim, target);
  const Outcome r = run_with_file_limit(args, 0);
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(slurp(victim), "not yours\n");
  EXPECT_FALSE(fs::is_symlink(fs::symlink_status(target))) << target;
  EXPECT_GT(fs::file_size(target), 0u) << target;
}

// Whether YOLO txt lines hold a box of class `c`.
bool has_class(const std::string& txt, int c) {
  return ("\n" + txt).find("\n" + std::to_string(c) + " ") != std::string::npos;
}

struct Data {
  std::string model, bus, zidane;
};

#define REQUIRE_DATA(d)                                                                                      \
  Data d{data_file("models/yolov5n.onnx"), data_file("images/bus.jpg"), data_file("images/zidane.jpg")};    \
  if (d.model.empty() || d.bus.empty() || d.zidane.empty()) GTEST_SKIP() << "test material not found in " << data_dir()

std::string detect(const Data& d) { return "detect --device cpu --quiet --model " + quote(d.model) + " "; }

TEST(CliOutputs, JsonFullDiskSymlinkAndStdout) {
  REQUIRE_DATA(d);
  const std::string dir = scratch_dir("cli_outputs/json");
  fs::remove_all(dir);
  const std::string json = dir + "/out/r.json";
  const std::string args = detect(d) + quote(d.bus) + " " + quote(d.zidane) + " --json " + quote(json);
  expect_full_disk_refused(args, json, 512);  // the JSON of both images is over 1 KB
  expect_link_replaced(args, json);
  EXPECT_NE(slurp(json).find("\"images\""), std::string::npos);
  // a link to a file that does not exist: the checks before the run do not create it either
  fs::remove(json);
  fs::create_symlink(dir + "/ghost.txt", json);
  EXPECT_EQ(run_with_file_limit(args, 0).rc, 0);
  EXPECT_FALSE(fs::exists(dir + "/ghost.txt"));
  EXPECT_FALSE(fs::is_symlink(fs::symlink_status(json)));
  // stdout to a file under the limit: the write error is named too
  const Outcome r = run_with_file_limit(detect(d) + quote(d.bus) + " --json - > " + quote(dir + "/stdout.json"), 256);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("standard output: cannot write: File too large"), std::string::npos) << r.out;
}

TEST(CliOutputs, LabelsImagesAndDumpsFullDiskAndSymlinks) {
  REQUIRE_DATA(d);
  const std::string dir = scratch_dir("cli_outputs/images");
  fs::remove_all(dir);
  const std::string out = dir + "/runs";
  const std::string base = detect(d) + quote(d.bus) + " --output-dir " + quote(out);
  expect_full_disk_refused(base + " --save-txt", out + "/labels/bus.txt", 16);
  expect_full_disk_refused(base + " --save-img", out + "/bus.jpg", 4096);
  expect_full_disk_refused(base + " --nosave --dump " + quote(dir + "/dump"), dir + "/dump/bus_letterboxed.npy", 4096);
  expect_link_replaced(base + " --save-txt", out + "/labels/bus.txt");
  EXPECT_TRUE(has_class(slurp(out + "/labels/bus.txt"), 5));  // the bus
  expect_link_replaced(base + " --save-img", out + "/bus.jpg");
  EXPECT_EQ(slurp(out + "/bus.jpg").substr(0, 3), "\xff\xd8\xff");
  expect_link_replaced(base + " --nosave --dump " + quote(dir + "/dump"), dir + "/dump/bus_candidates.npy");
}

// a/x.jpg (bus) and b/x.jpg (zidane) in one run: two label files, two images, two dumps.
TEST(CliOutputs, SameNameInputsGetDistinctOutputs) {
  REQUIRE_DATA(d);
  const std::string dir = scratch_dir("cli_outputs/same_name");
  fs::remove_all(dir);
  fs::create_directories(dir + "/a");
  fs::create_directories(dir + "/b");
  fs::copy_file(d.bus, dir + "/a/x.jpg");
  fs::copy_file(d.zidane, dir + "/b/x.jpg");
  const std::string out = dir + "/runs";
  const Outcome r = run_with_file_limit(detect(d) + quote(dir + "/a/x.jpg") + " " + quote(dir + "/b/x.jpg") +
                                        " --save-txt --save-img --output-dir " + quote(out) + " --dump " +
                                        quote(dir + "/dump"),
                                    0);
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string first = slurp(out + "/labels/x.txt"), second = slurp(out + "/labels/x_1.txt");
  EXPECT_FALSE(first.empty());
  EXPECT_FALSE(second.empty());
  EXPECT_NE(first, second);  // bus.jpg has a bus (class 5), zidane.jpg has none
  EXPECT_TRUE(has_class(first, 5)) << first;
  EXPECT_FALSE(has_class(second, 5)) << second;
  EXPECT_TRUE(fs::exists(out + "/x.jpg"));
  EXPECT_TRUE(fs::exists(out + "/x_1.jpg"));
  EXPECT_NE(slurp(out + "/x.jpg"), slurp(out + "/x_1.jpg"));
  EXPECT_NE(slurp(dir + "/dump/x_letterboxed.npy"), slurp(dir + "/dump/x_1_letterboxed.npy"));
}

// --source over a folder of images (an image sequence): --jsonl and --save.
TEST(CliOutputs, JsonlAndVideoFullDiskAndSymlinks) {
  REQUIRE_DATA(d);
  const std::string dir = scratch_dir("cli_outputs/video");
  fs::remove_all(dir);
  fs::create_directories(dir + "/seq");
  for (int i = 0; i < 3; ++i) fs::copy_file(d.bus, dir + "/seq/" + std::to_string(i) + ".jpg");
  const std::string out = dir + "/runs";
  const std::string base = detect(d) + "--source " + quote(dir + "/seq") + " --output-dir " + quote(out);
  expect_full_disk_refused(base + " --jsonl " + quote(out + "/f.jsonl"), out + "/f.jsonl", 1024);
  expect_link_replaced(base + " --jsonl " + quote(out + "/f.jsonl"), out + "/f.jsonl");
  const std::string lines = slurp(out + "/f.jsonl");
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 3) << lines;
  if (!video_input_supported()) GTEST_SKIP() << "the video parts: this build has no FFmpeg (YOLOCU_VIDEO=OFF)";
  expect_full_disk_refused(base + " --save", out + "/seq.mp4", 4096);
  expect_link_replaced(base + " --save", out + "/seq.mp4");
  EXPECT_EQ(slurp(out + "/seq.mp4").substr(4, 4), "ftyp");
}

// yolocu track --detections (no model needed): its --jsonl and its MOT files (--save-txt).
TEST(CliOutputs, TrackJsonlAndMotFullDiskAndSymlinks) {
  const std::string dir = scratch_dir("cli_outputs/track");
  fs::remove_all(dir);
  std::string in;
  for (int f = 0; f < 20; ++f)
    in += "{\"source\": \"cam.mp4\", \"frame\": " + std::to_string(f) + ", \"detections\": [{\"box\": [" +
          std::to_string(10 + f) + ", 20, 60, 90], \"confidence\": 0.9, \"class_id\": 0}]}\n";
  put(dir + "/in.jsonl", in);
  const std::string out = dir + "/runs";
  const std::string base = "track --detections " + quote(dir + "/in.jsonl") + " --output-dir " + quote(out);
  expect_full_disk_refused(base + " --jsonl " + quote(out + "/t.jsonl"), out + "/t.jsonl", 1024);
  expect_full_disk_refused(base + " --save-txt", out + "/cam.txt", 256);  // 20 lines of ~45 bytes
  expect_link_replaced(base + " --jsonl " + quote(out + "/t.jsonl"), out + "/t.jsonl");
  expect_link_replaced(base + " --save-txt", out + "/cam.txt");
  const std::string mot = slurp(out + "/cam.txt");
  EXPECT_EQ(std::count(mot.begin(), mot.end(), '\n'), 20) << mot;
}

TEST(CliOutputs, InferNpyFullDiskAndSymlink) {
  fuzz::Builder b(13);
  b.input("x", {1, 8, 32, 32});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  const std::string dir = scratch_dir("cli_outputs/infer");
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir + "/relu.onnx", std::ios::binary) << b.bytes();
  save_npy(dir + "/x.npy", Tensor(DType::kFloat32, {1, 8, 32, 32}));
  const std::string args = "infer --model " + quote(dir + "/relu.onnx") + " --input " + quote(dir + "/x.npy") +
                           " --output-dir " + quote(dir + "/out");
  expect_full_disk_refused(args, dir + "/out/y.npy", 4096);  // 32 KiB of output
  expect_link_replaced(args, dir + "/out/y.npy");
  EXPECT_EQ(load_npy(dir + "/out/y.npy").nbytes(), 8u * 32 * 32 * 4);
}

}  // namespace
}  // namespace yolocu::test
