#include "paths.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include "yolocu/atomic_file.hpp"
#include "yolocu/error.hpp"

namespace yolocu::cli {
namespace fs = std::filesystem;

namespace {

// "'a.onnx', 'b.onnx'" style listing of up to three names.
std::string some_names(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < std::min<size_t>(names.size(), 3); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + (names.size() > 3 ? ", ..." : "");
}

// Why `p` cannot be created as a folder (or hold a file): the first part of it that exists and is
// not a folder, or "" when there is none.
std::string blocking_file(const fs::path& p) {
  std::error_code ec;
  for (fs::path q = p; !q.empty(); q = q.parent_path()) {
    const fs::file_status st = fs::status(q, ec);
    if (fs::exists(st)) return fs::is_directory(st) ? "" : q.string();
    if (q == q.parent_path()) break;
  }
  return "";
}

}  // namespace

std::vector<Source> expand_inputs(const std::vector<std::string>& specs) {
  try {
    std::vector<std::string> skipped;
    std::vector<Source> sources = expand_sources(specs, &skipped);
    if (!skipped.empty()) {
      std::string names;
      for (size_t i = 0; i < std::min<size_t>(skipped.size(), 5); ++i) names += (i ? ", " : "") + skipped[i];
      std::fprintf(stderr, "yolocu: skipped %zu %s (images are %s): %s%s\n", skipped.size(),
                   skipped.size() > 1 ? "files that are not images" : "file that is not an image", kImageSuffixes,
                   names.c_str(), skipped.size() > 5 ? ", ..." : "");
    }
    return sources;
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kInvalidArgument) throw UsageError(e.what());  // a folder without images
    throw;
  }
}

std::string file_stem(const std::string& path) { return fs::path(path).stem().string(); }

std::vector<std::string> unique_stems(const std::vector<std::string>& stems) {
  const std::set<std::string> as_given(stems.begin(), stems.end());
  std::set<std::string> used;
  std::vector<std::string> out;
  for (size_t i = 0; i < stems.size(); ++i) {
    std::string s = stems[i];
    if (used.count(s)) {  // a later input of the same name: "<stem>_<index>", clear of every other name
      const std::string base = s + "_" + std::to_string(i);
      s = base;
      for (int k = 2; used.count(s) || as_given.count(s); ++k) s = base + "_" + std::to_string(k);
    }
    used.insert(s);
    out.push_back(s);
  }
  return out;
}

void check_model_file(const std::string& path) { check_input_file("--model", path, "an ONNX file", ".onnx"); }

void check_input_file(const std::string& option, const std::string& path, const std::string& kind,
                      const std::string& ext) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    if (ec && ec != std::errc::no_such_file_or_directory)
      throw UsageError(option + " " + path + ": cannot read it: " + ec.message());
    const std::string blocker = blocking_file(fs::path(path).parent_path());
    throw UsageError(option + " " + path + ": no such file" + (blocker.empty() ? "" : " ('" + blocker + "' is a file, not a folder)"));
  }
  if (fs::is_directory(st)) {
    std::vector<std::string> candidates;
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.path().extension() == ext) candidates.push_back(e.path().filename().string());
    std::sort(candidates.begin(), candidates.end());
    throw UsageError(option + " " + path + ": is a folder, not " + kind +
                     (candidates.empty() ? "" : " (it holds " + some_names(candidates) + ")"));
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UsageError(option + " " + path + ": cannot read it: " + std::strerror(errno));
}

void prepare_output_dir(const std::string& option, const std::string& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return;
  const std::string blocker = blocking_file(dir);
  if (blocker == dir) throw UsageError(option + " " + dir + ": exists and is not a folder");
  if (!blocker.empty()) throw UsageError(option + " " + dir + ": cannot create it: '" + blocker + "' is a file, not a folder");
  fs::create_directories(dir, ec);
  if (ec) throw UsageError(option + " " + dir + ": cannot create the folder: " + ec.message());
}

void check_output_file(const std::string& option, const std::string& path) {
  if (path == "-") return;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw UsageError(option + " " + path + ": is a folder; name a file");
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    const std::string blocker = blocking_file(parent);
    if (!blocker.empty()) throw UsageError(option + " " + path + ": cannot create it: '" + blocker + "' is a file, not a folder");
    fs::create_directories(parent, ec);
    if (ec) throw UsageError(option + " " + path + ": cannot create its folder " + parent.string() + ": " + ec.message());
  }
  // The file is written later as an AtomicFile (a new file beside it, renamed over it): whether one
  // can be created there is the question; the file itself (or a link planted there) is not opened.
  try {
    AtomicFile probe(path);
  } catch (const Error& e) {
    throw UsageError(option + " " + e.what());  // "--json out/r.json: cannot create a file in its folder: ..."
  }
}

}  // namespace yolocu::cli
