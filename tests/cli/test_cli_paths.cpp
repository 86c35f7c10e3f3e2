// Path mistakes on the command line: each one is a usage error (exit status 2) whose message names
// the option, the path and the problem, found before the model is loaded. The model file here is
// a few bytes of text: a check that let the command go on would fail later, loading it, with
// exit status 1 and another message. Needs no test material.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli/cli_test_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/model.hpp"

namespace yolocu::test {
namespace {
namespace fs = std::filesystem;

// A scratch folder with a (fake) model, a (fake) image and a plain file to block paths with.
struct Paths {
  std::string dir, model, image, file;
};

Paths make_paths(const std::string& name) {
  Paths p;
  p.dir = scratch_dir("cli_paths") + "/" + name;
  fs::remove_all(p.dir);
  fs::create_directories(p.dir);
  p.model = p.dir + "/m.onnx";
  p.image = p.dir + "/a.jpg";
  p.file = p.dir + "/plain.txt";
  std::ofstream(p.model) << "not really a model";
  std::ofstream(p.image) << "not really an image";
  std::ofstream(p.file) << "a file, not a folder";
  return p;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Runs the CLI; expects exit status 2 and every part in the message.
void expect_usage_error(const std::string& args, const std::vector<std::string>& parts) {
  std::string out, err;
  EXPECT_EQ(run_yolocu(args, &out, &err, "cli_paths"), 2) << args << "\n" << err;
  for (const auto& part : parts) EXPECT_TRUE(contains(err, part)) << args << "\nmissing '" << part << "' in: " << err;
  EXPECT_FALSE(contains(err, "unexpected error")) << err;
}

TEST(CliPaths, ModelIsAFolder) {
  const Paths p = make_paths("model_folder");
  fs::copy_file(p.model, p.dir + "/sub.onnx");
  const std::string dir = quote(p.dir);
  for (const std::string& cmd : {"detect --model " + dir + " " + quote(p.image),
                                "eval --model " + dir + " --images " + quote(p.image) + " --labels " + dir,
                                "bench --model " + dir, "inspect --model " + dir,
                                "infer --model " + dir + " --input x.npy --output-dir " + quote(p.dir + "/out")})
    expect_usage_error(cmd, {"--model " + p.dir, "is a folder, not an ONNX file", "'m.onnx', 'sub.onnx'"});

  // the library says so too (it used to report "out of memory ... 9223372036854775807 bytes")
  try {
    load_onnx(p.dir);
    ADD_FAILURE() << "load_onnx of a folder did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_TRUE(contains(e.what(), p.dir)) << e.what();
    EXPECT_TRUE(contains(e.what(), "folder")) << e.what();
  }
}

TEST(CliPaths, ModelMissing) {
  const Paths p = make_paths("model_missing");
  expect_usage_error("detect --model " + quote(p.dir + "/nope.onnx") + " " + quote(p.image),
                     {"--model " + p.dir + "/nope.onnx", "no such file"});
  expect_usage_error("inspect --model " + quote(p.file + "/m.onnx"), {p.file + "/m.onnx"});
}

TEST(CliPaths, ModelUnreadable) {
  const Paths p = make_paths("model_unreadable");
  ASSERT_EQ(::chmod(p.model.c_str(), 0), 0);
  // root reads any file: run the CLI as nobody then (setpriv, util-linux)
  std::string prefix;
  if (::geteuid() == 0) {
    prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    std::string out;
    if (run_command(prefix + quote(yolocu_binary()) + " --version", &out) != 0)
      GTEST_SKIP() << "running as root and cannot run the CLI as nobody here: " << out;
  }
  std::string out;
  const int rc = run_command(prefix + quote(yolocu_binary()) + " detect --model " + quote(p.model) + " " + quote(p.image), &out);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(contains(out, "--model " + p.model + ": cannot read it: Permission denied")) << out;
  ::chmod(p.model.c_str(), 0644);
}

TEST(CliPaths, ImagesFolderWithoutImages) {
  const Paths p = make_paths("no_images");
  const std::string empty = p.dir + "/empty", nested = p.dir + "/nested";
  fs::create_directories(empty);
  fs::create_directories(nested + "/train2017");
  fs::create_directories(nested + "/val2017");
  std::ofstream(nested + "/notes.txt") << "no image here";
  fs::copy_file(p.image, nested + "/train2017/a.jpg");
  const std::string m = " --model " + quote(p.model) + " ";
  expect_usage_error("detect" + m + quote(empty), {empty + ": no images in this folder"});
  expect_usage_error("detect" + m + quote(p.image) + " " + quote(nested),  // also next to a good input
                     {nested + ": no images in this folder", "2 subfolders: 'train2017', 'val2017'"});
  expect_usage_error("eval" + m + "--images " + quote(empty) + " --labels " + quote(p.dir),
                     {empty + ": no images in this folder"});
}

TEST(CliPaths, LabelsDoNotMatch) {
  const Paths p = make_paths("labels");
  const std::string images = p.dir + "/images", labels = p.dir + "/labels";
  fs::create_directories(images);
  fs::create_directories(labels);
  fs::copy_file(p.image, images + "/a.jpg");
  fs::copy_file(p.image, images + "/b.jpg");
  std::ofstream(labels + "/x.txt") << "0 0.5 0.5 0.1 0.1\n";
  const std::string m = "eval --model " + quote(p.model) + " --images " + quote(images);
  expect_usage_error(m + " --labels " + quote(labels),
                     {"--labels " + labels, "none of the 2 images has a label file there", labels + "/a.txt",
                      "1 .txt files, e.g. x.txt"});
  expect_usage_error(m + " --labels " + quote(p.file), {"--labels " + p.file + ": is not a folder"});
  expect_usage_error(m + " --labels " + quote(p.dir + "/nope"), {"--labels " + p.dir + "/nope: no such folder"});

  // one matching label file is enough (images without one are background): the run goes on and
  // fails on the fake model instead, with status 1
  std::ofstream(labels + "/b.txt") << "0 0.5 0.5 0.1 0.1\n";
  std::string out, err;
  EXPECT_EQ(run_yolocu(m + " --labels " + quote(labels), &out, &err, "cli_paths"), 1) << err;
  EXPECT_FALSE(contains(err, "--labels")) << err;
}

TEST(CliPaths, OutputCannotBeCreated) {
  const Paths p = make_paths("outputs");
  const std::string m = " --model " + quote(p.model) + " ";
  const std::string under = p.file + "/out";  // a folder inside a file
  const std::string blocked = "'" + p.file + "' is a file, not a folder";
  expect_usage_error("detect" + m + "--json " + quote(under + "/d.json") + " " + quote(p.image),
                     {"--json " + under + "/d.json", blocked});
  expect_usage_error("detect" + m + "--json " + quote(p.dir) + " " + quote(p.image), {"--json " + p.dir, "is a folder"});
  expect_usage_error("detect" + m + "--save-txt --output-dir " + quote(under) + " " + quote(p.image),
                     {"--output-dir " + under, blocked});
  expect_usage_error("detect" + m + "--save-img --output-dir " + quote(p.file) + " " + quote(p.image),
                     {"--output-dir " + p.file + ": exists and is not a folder"});
  expect_usage_error("detect" + m + "--dump " + quote(under) + " " + quote(p.image), {"--dump " + under, blocked});
  std::ofstream(p.dir + "/a.txt") << "0 0.5 0.5 0.1 0.1\n";  // the labels of a.jpg
  expect_usage_error("eval" + m + "--images " + quote(p.image) + " --labels " + quote(p.dir) + " --json " +
                         quote(under + "/e.json"),
                     {"--json " + under + "/e.json", blocked});
  expect_usage_error("bench" + m + "--json " + quote(under + "/b.json"), {"--json " + under + "/b.json", blocked});
  expect_usage_error("infer" + m + "--input x.npy --output-dir " + quote(under), {"--output-dir " + under, blocked});
  // nothing was created on the way
  EXPECT_TRUE(fs::is_regular_file(p.file));
}

}  // namespace
}  // namespace yolocu::test

namespace yolocu::test {
namespace {

// Options that docs/cli.md shows with several values take them all (they were taken as image paths).
TEST(CliOptions, TuneBatchesTakesAList) {
  const Paths p = make_paths("tune_batches");
  expect_usage_error("detect --model " + quote(p.model) + " --tune-batches 1 8 32 " + quote(p.image),
                     {"--tune-batches: 8 is outside 1..--batch (1)"});
}

// --json with --source was ignored without a word; --jsonl is the JSON of a video.
TEST(CliOptions, JsonWithSourceIsAnError) {
  const Paths p = make_paths("json_source");
  expect_usage_error("detect --model " + quote(p.model) + " --source " + quote(p.dir + "/clip.mp4") + " --json " +
                         quote(p.dir + "/out.json"),
                     {"--json is for images", "--jsonl"});
}

}  // namespace
}  // namespace yolocu::test
