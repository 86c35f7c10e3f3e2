// The library's limits as the CLI reaches them: --max-pixels on detect (images and --source
// frames), eval and bench; --max-memory over model parsing (infer, detect); credentials in a
// source URL never printed, written or made into a file name.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include <filesystem>
#include <fstream>

#include "cli/cli_test_util.hpp"
#include "onnx_builder.hpp"
#include "yolocu/image.hpp"
#include "yolocu/npy.hpp"
#include "yolocu/video.hpp"
#include "yolocu/video_writer.hpp"

namespace yolocu::test {
namespace {
namespace fs = std::filesystem;

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// bus.jpg is 810x1080 = 874,800 pixels.
TEST(CliHostile, MaxPixelsRefusesLargerImagesByName) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  const std::string base = "detect --device cpu --quiet --model " + quote(model) + " " + quote(bus);
  std::string out, err;
  EXPECT_EQ(run_yolocu(base + " --max-pixels 874799", &out, &err), 1) << err;
  EXPECT_TRUE(contains(err, "bus.jpg")) << err;
  EXPECT_TRUE(contains(err, "810x1080")) << err;
  EXPECT_TRUE(contains(err, "max_pixels 874799")) << err;
  EXPECT_EQ(run_yolocu(base + " --max-pixels 874800", &out, &err), 0) << err;
  EXPECT_EQ(run_yolocu(base + " --max-pixels 1M", &out, &err), 0) << err;
  EXPECT_EQ(run_yolocu(base + " --max-pixels 0.8M", &out, &err), 2) << err;  // a usage error
  EXPECT_TRUE(contains(err, "--max-pixels: '0.8M' is not a pixel count")) << err;
  EXPECT_EQ(run_yolocu(base + " --max-pixels 0", &out, &err), 2) << err;
  EXPECT_EQ(run_yolocu(base + " --max-pixels 99999999999999999999", &out, &err), 2) << err;
}

TEST(CliHostile, MaxPixelsHoldsForVideoFramesEvalAndBench) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  const std::string dir = scratch_dir("cli_hostile/frames");
  fs::remove_all(dir);
  fs::create_directories(dir + "/seq");
  fs::copy_file(bus, dir + "/seq/0.jpg");
  std::string out, err;
  // an image sequence through FFmpeg: the frame is refused by the decoder's limit
  EXPECT_EQ(run_yolocu("detect --device cpu --quiet --model " + quote(model) + " --source " + quote(dir + "/seq") +
                           " --max-pixels 500000 --jsonl -",
                       &out, &err),
            1)
      << err;
  EXPECT_TRUE(contains(err, "max_pixels 500000")) << err;
  EXPECT_EQ(out, "");
  EXPECT_EQ(run_yolocu("bench --device cpu --model " + quote(model) + " --image " + quote(bus) +
                           " --iters 1 --warmup 0 --max-pixels 500000",
                       &out, &err),
            1)
      << err;
  EXPECT_TRUE(contains(err, "max_pixels 500000")) << err;
  // eval over a folder of one image and its (empty) label file
  fs::create_directories(dir + "/eval/images");
  fs::create_directories(dir + "/eval/labels");
  fs::copy_file(bus, dir + "/eval/images/bus.jpg");
  std::ofstream(dir + "/eval/labels/bus.txt") << "5 0.5 0.5 0.9 0.5\n";
  EXPECT_EQ(run_yolocu("eval --device cpu --quiet --model " + quote(model) + " --images " + quote(dir + "/eval/images") +
                           " --labels " + quote(dir + "/eval/labels") + " --max-pixels 500000",
                       &out, &err),
            1)
      << out << err;
  EXPECT_TRUE(contains(err, "max_pixels 500000")) << err;
}

// A chain of 5,000 Relu nodes: the parse estimate (2 KiB a node) is over 1 MiB, the graph's own
// tensors are not: --max-memory now refuses it while loading, before the planner runs.
TEST(CliHostile, MaxMemoryCoversModelParsing) {
  fuzz::Builder b(13);
  b.input("x", {1, 1});
  b.output("y");
  std::string prev = "x";
  for (int i = 0; i < 5000; ++i) {
    const std::string next = i + 1 == 5000 ? "y" : "r" + std::to_string(i);
    b.node("Relu", {prev}, {next});
    prev = next;
  }
  const std::string dir = scratch_dir("cli_hostile/parse");
  fs::create_directories(dir);
  std::ofstream(dir + "/chain.onnx", std::ios::binary) << b.bytes();
  save_npy(dir + "/x.npy", Tensor(DType::kFloat32, {1, 1}));
  const std::string args = "infer --model " + quote(dir + "/chain.onnx") + " --input " + quote(dir + "/x.npy") +
                           " --output-dir " + quote(dir + "/out");
  std::string out, err;
  EXPECT_EQ(run_yolocu(args + " --max-memory 1M", &out, &err), 1) << err;
  EXPECT_TRUE(contains(err, "chain.onnx: loading the model")) << err;
  EXPECT_TRUE(contains(err, "max_memory 1048576")) << err;
  EXPECT_EQ(run_yolocu(args + " --max-memory 256M", &out, &err), 0) << err;
}

TEST(CliHostile, DetectMaxMemoryCoversModelParsing) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  std::string out, err;
  // the file is ~7.6 MB: about 3 times that to parse, over 8 MiB
  EXPECT_EQ(run_yolocu("detect --device cpu --quiet --model " + quote(model) + " " + quote(bus) + " --max-memory 8M",
                       &out, &err),
            1)
      << err;
  EXPECT_TRUE(contains(err, "yolov5n.onnx: loading the model")) << err;
}

// Python's http.server over `dir` on a free loopback port (no Range support: the stream is read
// front to back); stopped when destroyed.
class LoopbackHttp {
 public:
  explicit LoopbackHttp(const std::string& dir) {
    const std::string port_file = dir + "/port.txt";
    fs::remove(port_file);
    const char* script =
        "import functools, http.server, sys\n"
        "h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])\n"
        "s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), h)\n"
        "open(sys.argv[2] + '.tmp', 'w').write(str(s.server_address[1]))\n"
        "import os; os.rename(sys.argv[2] + '.tmp', sys.argv[2])\n"
        "s.serve_forever()\n";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execlp("python3", "python3", "-c", script, dir.c_str(), port_file.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 100 && !fs::exists(port_file); ++i) ::usleep(50000);
    port_ = slurp(port_file);
  }
  ~LoopbackHttp() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  const std::string& port() const { return port_; }

 private:
  pid_t pid_ = -1;
  std::string port_;
};

// A network source with a user, a password and a token, served on the loopback: every frame is
// detected, and no line printed, no JSON line and no file name made carries the secrets.
TEST(CliHostile, SourceCredentialsAreNeverShownOrWritten) {
  YOLOCU_REQUIRE_DATA(model, "models/yolov5n.onnx");
  YOLOCU_REQUIRE_DATA(bus, "images/bus.jpg");
  if (!video_input_supported()) GTEST_SKIP() << "needs a video stream: this build has no FFmpeg (YOLOCU_VIDEO=OFF)";
  const std::string dir = scratch_dir("cli_hostile/redact");
  fs::remove_all(dir);
  fs::create_directories(dir + "/www");
  {
    const Image frame = decode_image_file(bus);
    auto w = VideoWriter::open(dir + "/www/cam.mkv", frame.width(), frame.height(), 10);
    for (int i = 0; i < 3; ++i) w->write(frame.view());
    w->close();
  }
  LoopbackHttp server(dir + "/www");
  ASSERT_FALSE(server.port().empty()) << "python3 -m http.server did not start";
  const std::string url = "http://alice:hunter2@127.0.0.1:" + server.port() + "/cam.mkv?token=s3cret&x=1";
  const std::string out_dir = dir + "/runs";
  std::string out, err;
  const int rc = run_yolocu("detect --device cpu --verbose --model " + quote(model) + " --source " + quote(url) +
                                " --timeout 10 --reconnects 0 --save --save-frames --output-dir " + quote(out_dir) +
                                " --jsonl " + quote(out_dir + "/f.jsonl"),
                            &out, &err);
  EXPECT_EQ(rc, 0) << err;
  const std::string jsonl = slurp(out_dir + "/f.jsonl");
  EXPECT_EQ(std::count(jsonl.begin(), jsonl.end(), '\n'), 3) << jsonl << err;
  EXPECT_TRUE(contains(jsonl, "\"source\": \"http://***@127.0.0.1:" + server.port() + "/cam.mkv?token=***&x=1\""))
      << jsonl;
  size_t files = 0;
  for (const char* secret : {"alice", "hunter2", "s3cret"}) {
    EXPECT_FALSE(contains(out + err, secret)) << out << err;
    EXPECT_FALSE(contains(jsonl, secret)) << jsonl;
    for (const auto& e : fs::recursive_directory_iterator(out_dir)) {
      EXPECT_FALSE(contains(e.path().string(), secret)) << e.path();
      ++files;
    }
  }
  EXPECT_GE(files, 3u * 5);  // f.jsonl, the video, a folder of 3 frames: seen for each secret
}

}  // namespace
}  // namespace yolocu::test
