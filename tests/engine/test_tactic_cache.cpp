// The GPU engine's tactic cache file (host-only, no GPU): round trip, several devices in one file,
// and every kind of bad file ignored with a warning naming the file and the reason, never trusted.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/cuda/tactics/conv_problem.hpp"
#include "engine/cuda/tactics/tactic_cache.hpp"
#include "test_util.hpp"

namespace yolocu {
namespace {

using engine::TacticCache;
using engine::TacticRecord;

std::string scratch_file(const std::string& name) { return test::scratch_dir("tactic_cache") + "/" + name; }

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(TacticCache, RoundTripKeepsOtherDevices) {
  const std::string path = scratch_file("round_trip.json");
  std::remove(path.c_str());
  TacticCache a("GPU A");
  std::string warning;
  ASSERT_TRUE(a.load(path, &warning)) << "a missing file is no error";
  EXPECT_EQ(a.size(), 0u);
  a.put("fp16 x32 conv", 1, {"cudnn-graph:e4;24=26", "cudnn-graph eng4_k24=26", 3.25});
  a.put("fp16 x32 conv", 32, {"cudnn:IMPLICIT_PRECOMP_GEMM", "cudnn IMPLICIT_PRECOMP_GEMM", 48.5});
  EXPECT_TRUE(a.dirty());
  ASSERT_TRUE(a.save(path, &warning)) << warning;

  TacticCache b("GPU B");
  ASSERT_TRUE(b.load(path, &warning));
  EXPECT_EQ(b.size(), 0u) << "another GPU's entries are never used";
  b.put("fp16 x32 conv", 1, {"cudnn:GEMM", "cudnn GEMM", 9});
  ASSERT_TRUE(b.save(path, &warning));

  TacticCache a2("GPU A");
  ASSERT_TRUE(a2.load(path, &warning));
  ASSERT_EQ(a2.size(), 2u) << "saving GPU B kept GPU A's entries";
  const TacticRecord* r = a2.find("fp16 x32 conv", 1);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->tactic, "cudnn-graph:e4;24=26");
  EXPECT_EQ(r->name, "cudnn-graph eng4_k24=26");
  EXPECT_DOUBLE_EQ(r->us, 3.25);
  EXPECT_TRUE(r->loaded);
  a2.put("fp16 x32 conv", 8, {"cudnn:GEMM", "", 1});
  EXPECT_FALSE(a2.find("fp16 x32 conv", 8)->loaded) << "put() entries are not from the file";
  EXPECT_EQ(a2.find("fp16 x32 conv", 16), nullptr) << "batch is part of the key";
  EXPECT_EQ(a2.find("fp32 x32 conv", 1), nullptr);
  EXPECT_NE(read(path).find("\"format\": \"yolocu-tactic-cache\""), std::string::npos) << read(path);
}

// Serialised plans travel as base64: RFC 4648's test vectors, malformed text refused, and a record's
// plan through the file and back byte for byte.
TEST(TacticCache, PlansRoundTripAsBase64) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : vectors) {
    const std::string p(plain);
    EXPECT_EQ(TacticCache::encode_plan(std::vector<uint8_t>(p.begin(), p.end())), coded) << plain;
    std::vector<uint8_t> back;
    ASSERT_TRUE(TacticCache::decode_plan(coded, &back)) << coded;
    EXPECT_EQ(std::string(back.begin(), back.end()), p);
  }
  std::vector<uint8_t> junk;
  for (const char* bad : {"Zg=", "Zg===", "Z===", "=Zg=", "Zg=a", "Zm9v!A==", "Zm 9v"})
    EXPECT_FALSE(TacticCache::decode_plan(bad, &junk)) << bad;

  std::vector<uint8_t> blob(70000);
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<uint8_t>(i * 131 + 7);
  const std::string path = scratch_file("plans.json");
  std::remove(path.c_str());
  TacticCache a("GPU");
  std::string warning;
  TacticRecord r{"cudnn-graph:e4;24=26", "cudnn-graph eng4_k24=26", 3.25};
  r.plan = TacticCache::encode_plan(blob);
  r.plain = "cudnn:IMPLICIT_PRECOMP_GEMM";  // what derived sizes may take instead
  a.put("sig", 1, r);
  a.put("sig", 2, {"cudnn:GEMM", "cudnn GEMM", 5});
  ASSERT_TRUE(a.save(path, &warning)) << warning;
  TacticCache b("GPU");
  ASSERT_TRUE(b.load(path, &warning)) << warning;
  ASSERT_NE(b.find("sig", 1), nullptr);
  std::vector<uint8_t> back;
  ASSERT_TRUE(TacticCache::decode_plan(b.find("sig", 1)->plan, &back));
  EXPECT_EQ(back, blob);
  EXPECT_EQ(b.find("sig", 1)->plain, "cudnn:IMPLICIT_PRECOMP_GEMM");
  EXPECT_TRUE(b.find("sig", 2)->plan.empty()) << "no plan stays no plan";
  EXPECT_TRUE(b.find("sig", 2)->plain.empty()) << "no plain candidate stays none";

  // An entry read from the file and updated with the same tactic (its plan added by a warm
  // build) still counts as read from the file; another tactic put over it does not.
  EXPECT_TRUE(b.find("sig", 2)->loaded);
  TacticRecord with_plan = *b.find("sig", 2);
  with_plan.plan = TacticCache::encode_plan(blob);
  b.put("sig", 2, with_plan);
  EXPECT_TRUE(b.find("sig", 2)->loaded);
  b.put("sig", 2, {"cudnn:FFT", "cudnn FFT", 9});
  EXPECT_FALSE(b.find("sig", 2)->loaded);
  b.put("sig", 3, {"cudnn:GEMM", "cudnn GEMM", 5});
  EXPECT_FALSE(b.find("sig", 3)->loaded);
}

// Each bad file: load() says false with a warning naming the file, and nothing of it is used.
// Derived entries (a batch size that was not tuned): kept apart from the tuned ones (find() and
// find_derived() each see only theirs), untimed ("us" 0 whatever was put), round-tripped with their
// plan, and stored under a key that earlier builds' loader accepts ("...|b<batch>").
TEST(TacticCache, DerivedEntriesApartFromTunedOnes) {
  const std::string path = scratch_file("derived.json");
  std::remove(path.c_str());
  const std::vector<uint8_t> plan = {1, 2, 3, 250};
  TacticCache a("GPU A");
  a.put("fp16 x32 conv", 8, {"cudnn-graph:e4;24=26", "cudnn-graph eng4_k24=26", 3.25});
  a.put_derived("fp16 x32 conv", 3, {"cudnn-graph:e4;24=26", "cudnn-graph eng4_k24=26", 9.0, TacticCache::encode_plan(plan)});
  EXPECT_EQ(a.find("fp16 x32 conv", 3), nullptr) << "a derived entry is not a tuned choice";
  EXPECT_EQ(a.find_derived("fp16 x32 conv", 8), nullptr) << "a tuned entry is not a derived one";
  ASSERT_NE(a.find_derived("fp16 x32 conv", 3), nullptr);
  EXPECT_EQ(a.find_derived("fp16 x32 conv", 3)->us, 0.0);
  EXPECT_TRUE(a.dirty());
  std::string warning;
  ASSERT_TRUE(a.save(path, &warning)) << warning;
  EXPECT_NE(read(path).find("\"fp16 x32 conv|derived|b3\""), std::string::npos) << read(path);
  TacticCache b("GPU A");
  ASSERT_TRUE(b.load(path, &warning)) << warning;
  EXPECT_EQ(b.size(), 2u);
  const TacticRecord* d = b.find_derived("fp16 x32 conv", 3);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->tactic, "cudnn-graph:e4;24=26");
  std::vector<uint8_t> back;
  ASSERT_TRUE(TacticCache::decode_plan(d->plan, &back));
  EXPECT_EQ(back, plan);
  EXPECT_EQ(b.find("fp16 x32 conv", 3), nullptr);
  ASSERT_NE(b.find("fp16 x32 conv", 8), nullptr);
}

TEST(TacticCache, BadFilesAreIgnoredWithAWarning) {
  const std::string good_entry = R"("fp16 x|b1": {"tactic": "cudnn:GEMM", "us": 1})";
  const std::pair<const char*, std::string> cases[] = {
      {"not JSON", "{\"format\": \"yolocu-tactic-cache\", \"version\": 1, \"devices\": {"},
      {"binary garbage", std::string("\x00\x01\xff\xfe garbage", 12)},
      {"other format", R"({"format": "trt-timing-cache", "version": 1, "devices": {}})"},
      {"other version", R"({"format": "yolocu-tactic-cache", "version": 99, "devices": {}})"},
      {"version as text", R"({"format": "yolocu-tactic-cache", "version": "1", "devices": {}})"},
      {"no devices", R"({"format": "yolocu-tactic-cache", "version": 1})"},
      {"device not an object", R"({"format": "yolocu-tactic-cache", "version": 1, "devices": {"GPU": 3}})"},
      {"entry without batch", R"({"format": "yolocu-tactic-cache", "version": 1, "devices": {"GPU": {"sig": {"tactic": "cudnn:GEMM", "us": 1}}}})"},
      {"entry with bad batch", R"({"format": "yolocu-tactic-cache", "version": 1, "devices": {"GPU": {"sig|bx": {"tactic": "cudnn:GEMM", "us": 1}}}})"},
      {"tactic not a string", R"({"format": "yolocu-tactic-cache", "version": 1, "devices": {"GPU": {"sig|b1": {"tactic": 4, "us": 1}}}})"},
      {"empty tactic", R"({"format": "yolocu-tactic-cache", "version": 1, "devices": {"GPU": {"sig|b1": {"tactic": "", "us": 1}}}})"},
      {"negative time", R"({"format": "yolocu-tactic-cache", "version": 1, "devices": {"GPU": {"sig|b1": {"tactic": "cudnn:GEMM", "us": -1}}}})"},
      {"plan not a string", R"({"format": "yolocu-tactic-cache", "version": 1, "devices": {"GPU": {"sig|b1": {"tactic": "cudnn:GEMM", "us": 1, "plan": 7}}}})"},
      {"plan not base64", R"({"format": "yolocu-tactic-cache", "version": 1, "devices": {"GPU": {"sig|b1": {"tactic": "cudnn:GEMM", "us": 1, "plan": "ab$d"}}}})"},
      {"one bad entry among good", R"({"format": "yolocu-tactic-cache", "version": 1, "devices": {"GPU": {)" + good_entry + R"(, "sig|b2": {"us": 1}}}})"},
  };
  for (const auto& [what, text] : cases) {
    SCOPED_TRACE(what);
    const std::string path = scratch_file("bad.json");
    write(path, text);
    TacticCache c("GPU");
    std::string warning;
    EXPECT_FALSE(c.load(path, &warning));
    EXPECT_EQ(c.size(), 0u);
    EXPECT_NE(warning.find(path), std::string::npos) << warning;
    EXPECT_NE(warning.find("ignored"), std::string::npos) << warning;
    std::printf("[ %-26s ] %s\n", what, warning.c_str());
    // Saving over a corrupt file replaces it with a valid one.
    c.put("sig", 1, {"cudnn:GEMM", "", 2});
    ASSERT_TRUE(c.save(path, &warning)) << warning;
    TacticCache again("GPU");
    EXPECT_TRUE(again.load(path, &warning));
    EXPECT_EQ(again.size(), 1u);
  }
  // A directory where the file should be.
  TacticCache d("GPU");
  std::string warning;
  EXPECT_FALSE(d.load(test::scratch_dir("tactic_cache"), &warning));
  EXPECT_NE(warning.find("directory"), std::string::npos) << warning;
}

TEST(TacticCache, UnwritablePathIsAWarningNotAnError) {
  TacticCache c("GPU");
  c.put("sig", 1, {"cudnn:GEMM", "", 2});
  std::string warning;
  const std::string blocker = scratch_file("a_file");
  write(blocker, "x");
  EXPECT_FALSE(c.save(blocker + "/sub/tactics.json", &warning));
  EXPECT_NE(warning.find("not written"), std::string::npos) << warning;
}

TEST(TacticCache, SaveMergesByKeyWithWhatOthersSaved) {
  const std::string path = scratch_file("merge.json");
  std::remove(path.c_str());
  TacticCache a("GPU"), b("GPU");
  std::string warning;
  ASSERT_TRUE(a.load(path, &warning));
  ASSERT_TRUE(b.load(path, &warning));
  a.put("only a", 1, {"cudnn:GEMM", "", 1});
  a.put("both", 1, {"cudnn:GEMM", "", 1});
  b.put("only b", 1, {"cudnn:FFT", "", 2});
  b.put("both", 1, {"cudnn:FFT", "", 2});
  ASSERT_TRUE(a.save(path, &warning)) << warning;
  ASSERT_TRUE(b.save(path, &warning)) << warning;  // b did not load a's entries: they stay
  TacticCache c("GPU");
  ASSERT_TRUE(c.load(path, &warning)) << warning;
  EXPECT_EQ(c.size(), 3u);
  ASSERT_NE(c.find("only a", 1), nullptr);
  ASSERT_NE(c.find("only b", 1), nullptr);
  EXPECT_EQ(c.find("both", 1)->tactic, "cudnn:FFT");  // the last save wins on the same key
}

// Several processes saving into one file at the same time, each several times: every entry of
// every process is in the file at the end (without the lock and the merge, most were lost).
TEST(TacticCache, ProcessesSavingAtOnceLoseNothing) {
  const std::string path = scratch_file("processes.json");
  std::remove(path.c_str());
  constexpr int kProcesses = 8, kRounds = 5, kPerRound = 6;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    if (pid == 0) {
      TacticCache c(p % 2 == 0 ? "GPU even" : "GPU odd");
      std::string warning;
      bool ok = true;
      for (int r = 0; r < kRounds; ++r) {
        for (int i = 0; i < kPerRound; ++i)
          c.put("p" + std::to_string(p) + " r" + std::to_string(r) + " i" + std::to_string(i), 1,
                {"cudnn:GEMM", "", 1.0 + i});
        ok = c.save(path, &warning) && ok;
      }
      _exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a child's save failed";
  }
  std::string warning;
  TacticCache even("GPU even"), odd("GPU odd");
  ASSERT_TRUE(even.load(path, &warning)) << warning;
  ASSERT_TRUE(odd.load(path, &warning)) << warning;
  EXPECT_EQ(even.size(), size_t{kProcesses / 2 * kRounds * kPerRound});
  EXPECT_EQ(odd.size(), size_t{kProcesses / 2 * kRounds * kPerRound});
  for (int p = 0; p < kProcesses; ++p) {
    const TacticCache& c = p % 2 == 0 ? even : odd;
    for (int r = 0; r < kRounds; ++r)
      for (int i = 0; i < kPerRound; ++i)
        EXPECT_NE(c.find("p" + std::to_string(p) + " r" + std::to_string(r) + " i" + std::to_string(i), 1), nullptr);
  }
  // no temporary file is left behind
  for (const auto& e : std::filesystem::directory_iterator(test::scratch_dir("tactic_cache")))
    EXPECT_EQ(e.path().filename().string().find("processes.json.tmp"), std::string::npos) << e.path();
}

TEST(TacticCache, DefaultPath) {
  setenv("YOLOCU_TACTIC_CACHE", "/x/explicit.json", 1);
  EXPECT_EQ(TacticCache::default_path(), "/x/explicit.json");
  unsetenv("YOLOCU_TACTIC_CACHE");
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  EXPECT_EQ(TacticCache::default_path(), "/x/cache/yolocu/tactics.json");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/x/home", 1);
  EXPECT_EQ(TacticCache::default_path(), "/x/home/.cache/yolocu/tactics.json");
}

// The layer signature names everything a tactic depends on (the batch is added by the cache).
TEST(TacticCache, ProblemSignature) {
  engine::ConvProblem p;
  p.n = 8, p.c = 32, p.h = 320, p.w = 320, p.k = 64, p.r = p.s = 3, p.p = p.q = 160;
  p.pad_h = p.pad_w = 1, p.str_h = p.str_w = 2, p.bias = p.silu = true;
  EXPECT_EQ(p.signature(), "fp16 x32x320x320 w64x3x3 p1x1 s2x2 d1x1 g1+bias+silu");
  engine::ConvProblem q = p;
  q.n = 1;
  EXPECT_EQ(q.signature(), p.signature());
  q.residual = true;
  EXPECT_NE(q.signature(), p.signature());
  q = p;
  q.half = false;
  EXPECT_NE(q.signature(), p.signature());
  q = p;
  q.yp = 64;  // a pitch equal to k is a packed output: the same layer
  EXPECT_EQ(q.signature(), p.signature());
  q.yp = 128;  // a copy-free Concat's slice: its own tactics
  EXPECT_EQ(q.signature(), p.signature() + " yp128");
  EXPECT_EQ(q.packed().signature(), p.signature());
  EXPECT_DOUBLE_EQ(p.flops(), 2.0 * 8 * 160 * 160 * 64 * 32 * 9);
}

}  // namespace
}  // namespace yolocu
