// Helpers of the CLI tests: run the built `yolocu` binary, read its files.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test_util.hpp"

namespace yolocu::test {

inline std::string yolocu_binary() {
  const char* env = std::getenv("YOLOCU_CLI");
  return env ? std::string(env) : std::string(YOLOCU_BINARY_DIR) + "/apps/yolocu/yolocu";
}

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The working folder the CLI runs in: a new temporary folder of this test process (under $TMPDIR),
// removed when the process exits, so that what a run saves by default (detect's runs/detect/predict)
// lands there and never in the source or build tree.
inline std::string cli_cwd() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/yolocu-cli-XXXXXX";
    if (!::mkdtemp(templ.data())) return std::string(".");
    static const std::string remove_at_exit = templ;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(remove_at_exit, ec);
    });
    return templ;
  }();
  return dir;
}

// `yolocu <args>` as a shell command run in `cwd` (default cli_cwd()).
inline std::string yolocu_command(const std::string& args, const std::string& cwd = "") {
  return "cd " + quote(cwd.empty() ? cli_cwd() : cwd) + " && " + quote(yolocu_binary()) + " " + args;
}

// Runs `yolocu <args>` in `cwd` (default cli_cwd()); stdout into *out, stderr into *err (if given).
// Returns the exit status.
inline int run_yolocu(const std::string& args, std::string* out = nullptr, std::string* err = nullptr,
                      const std::string& tag = "cli", const std::string& cwd = "") {
  // One file per process and call: ctest runs the CLI tests as parallel processes, and a shared
  // stderr file let one test read another's messages.
  static int calls = 0;
  const std::string err_file =
      scratch_dir(tag) + "/stderr." + std::to_string(::getpid()) + "." + std::to_string(++calls) + ".txt";
  const int rc = run_command("( " + yolocu_command(args, cwd) + " 2>" + quote(err_file) + " )", out);
  if (err) {
    std::ifstream f(err_file);
    std::stringstream ss;
    ss << f.rdbuf();
    *err = ss.str();
  }
  std::remove(err_file.c_str());
  return rc;
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace yolocu::test
