#include "paths.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include "yolocu/atomic_file.hpp"
#include "yolocu/error.hpp"
#include "yolocu/video.hpp"

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

RunDir run_dir_option(const Args& args, const std::string& default_project, const std::string& default_name) {
  RunDir d;
  if (args.has("output-dir")) {
    for (const char* o : {"project", "name"})
      if (args.has(o)) throw UsageError(std::string("--output-dir and --") + o + " exclude each other (--output-dir DIR is the run folder itself)");
    if (args.flag("exist-ok")) throw UsageError("--output-dir DIR is written into as it is: --exist-ok is for --project / --name");
    d.path = args.get("output-dir");
    d.option = "--output-dir";
    if (d.path.empty()) throw UsageError("--output-dir: empty folder name");
    return d;
  }
  const std::string project = args.get("project", default_project), name = args.get("name", default_name);
  if (project.empty()) throw UsageError("--project: empty folder name");
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
    throw UsageError("--name '" + name + "': a folder name (not empty, no '/'), e.g. predict");
  d.path = (fs::path(project) / name).string();
  d.numbered = !args.flag("exist-ok");
  d.option = args.has("project") ? "--project" : args.has("name") ? "--name" : "the run folder";
  return d;
}

std::string claim_run_dir(const RunDir& dir) {
  if (!dir.numbered) {
    prepare_output_dir(dir.option, dir.path);
    return dir.path;
  }
  const fs::path parent = fs::path(dir.path).parent_path();
  if (!parent.empty()) prepare_output_dir(dir.option, parent.string());
  // ultralytics' increment_path: the path, else path2, path3, ... (the first free name); each taken
  // with one mkdir, which fails when another run took that name first
  for (int n = 1; n < 10000; ++n) {
    const std::string p = n == 1 ? dir.path : dir.path + std::to_string(n);
    std::error_code ec;
    if (fs::exists(fs::symlink_status(p, ec))) continue;
    if (fs::create_directory(p, ec)) return p;
    if (ec && ec != std::errc::file_exists) throw UsageError(dir.option + " " + p + ": cannot create the folder: " + ec.message());
  }
  throw UsageError(dir.option + " " + dir.path + ": " + dir.path + " to " + dir.path +
                   "9999 all exist: remove old runs, or give --exist-ok or another --name");
}

namespace {

// Whether the path's extension (any case) is one of `list` (".a, .b, ...").
bool suffix_listed(const std::string& path, const char* list) {
  std::string ext = fs::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // ".mp4" in ".asf, .avi, ...": compared as ", .mp4," in ", .asf, .avi, ...,"
  return ext.size() > 1 && (", " + std::string(list) + ",").find(", " + ext + ",") != std::string::npos;
}

}  // namespace

bool has_video_suffix(const std::string& path) { return suffix_listed(path, kVideoSuffixes); }

bool is_video_path(const std::string& path) {
  // a stream URL (rtsp://, http(s)://... not naming an image file) or a camera (/dev/videoN, or a
  // bare number as ultralytics' source=0 unless a file of that name exists)
  const SourceKind kind = classify_source(path);
  std::error_code ec;
  if (kind == SourceKind::kNetwork) return !suffix_listed(path, kImageSuffixes);
  if (kind == SourceKind::kCamera) return !fs::is_regular_file(path, ec);
  if (has_video_suffix(path)) return true;
  if (suffix_listed(path, kImageSuffixes)) return false;
  if (!fs::is_regular_file(path, ec)) return false;
  unsigned char b[192] = {};
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(b), sizeof b);
  const size_t n = static_cast<size_t>(f.gcount());
  auto at = [&](size_t off, const char* sig, size_t len) { return n >= off + len && std::memcmp(b + off, sig, len) == 0; };
  return at(4, "ftyp", 4) ||                                       // MP4, MOV, M4V, 3GP
         at(0, "\x1A\x45\xDF\xA3", 4) ||                          // Matroska, WebM
         (at(0, "RIFF", 4) && at(8, "AVI ", 4)) ||                 // AVI
         (n >= 189 && b[0] == 0x47 && b[188] == 0x47) ||           // MPEG-TS (188-byte packets)
         at(0, "\x00\x00\x01\xBA", 4) || at(0, "\x00\x00\x01\xB3", 4) ||  // MPEG-PS, MPEG-1/2 video
         at(0, "\x30\x26\xB2\x75", 4) ||                          // ASF, WMV
         at(0, "FLV\x01", 4);                                       // FLV
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
