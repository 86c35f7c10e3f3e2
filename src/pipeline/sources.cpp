// The pipeline's sources: their constructors, the expansion of file, folder and glob specs into
// files (yolocu/pipeline.hpp), and the text of an error as results carry it.
#include <glob.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "core/check.hpp"
#include "yolocu/error.hpp"
#include "yolocu/pipeline.hpp"

namespace yolocu {
namespace fs = std::filesystem;

namespace {

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".webp" || ext == ".tif" || ext == ".tiff" ||
         ext == ".bmp";
}

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// "'train2017', 'val2017'" style listing of up to three names.
std::string some_names(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < std::min<size_t>(names.size(), 3); ++i) s += (i ? ", '" : "'") + names[i] + "'";
  return s + (names.size() > 3 ? ", ..." : "");
}

// A folder's images, sorted; its other files into `skipped`; a folder without images is
// kInvalidArgument naming its subfolders.
void add_folder(const std::string& dir, std::vector<Source>& out, std::vector<std::string>* skipped) {
  std::error_code ec;
  std::vector<std::string> files, others;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    (is_image_name(e.path()) ? files : others).push_back(e.path().string());
  }
  std::sort(others.begin(), others.end());
  if (skipped) skipped->insert(skipped->end(), others.begin(), others.end());
  if (ec) {
    Source s = Source::file(dir);
    s.error = "kIo: " + dir + ": cannot list the folder: " + ec.message();
    out.push_back(std::move(s));
    return;
  }
  if (files.empty()) {
    std::vector<std::string> subfolders;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_directory(ec)) subfolders.push_back(e.path().filename().string());
    std::sort(subfolders.begin(), subfolders.end());
    std::string msg = dir + ": no images in this folder (" + std::string(kImageSuffixes) +
                      "; subfolders are not searched)";
    if (!others.empty())
      msg += "; it has " + std::to_string(others.size()) + " other file" + (others.size() > 1 ? "s" : "") + ": " +
             some_names(others);
    if (!subfolders.empty())
      msg += "; it has " + std::to_string(subfolders.size()) + " subfolder" + (subfolders.size() > 1 ? "s" : "") +
             ": " + some_names(subfolders);
    throw Error(ErrorCode::kInvalidArgument, msg);
  }
  std::sort(files.begin(), files.end());
  for (auto& f : files) out.push_back(Source::file(std::move(f)));
}

void add_glob(const std::string& pattern, std::vector<Source>& out) {
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(Source::file(g.gl_pathv[i]));  // glob sorts
  } else {
    Source s = Source::file(pattern);
    s.error = "kIo: " + pattern + ": no file matches the pattern";
    out.push_back(std::move(s));
  }
  globfree(&g);
}

}  // namespace

Source Source::file(std::string path) {
  Source s;
  s.kind = Kind::kFile;
  s.name = std::move(path);
  return s;
}

Source Source::encoded(const void* data, size_t size, std::string name) {
  Source s;
  s.kind = Kind::kEncoded;
  s.data = data;
  s.size = size;
  s.name = std::move(name);
  return s;
}

Source Source::decoded(const ImageView& image, std::string name) {
  Source s;
  s.kind = Kind::kDecoded;
  s.image = image;
  s.name = std::move(name);
  return s;
}

std::vector<Source> expand_sources(const std::vector<std::string>& specs, std::vector<std::string>* skipped) {
  std::vector<Source> out;
  for (const std::string& spec : specs) {
    std::error_code ec;
    if (fs::is_directory(spec, ec)) {
      add_folder(spec, out, skipped);
    } else if (!fs::exists(spec, ec) && has_glob_chars(spec)) {
      add_glob(spec, out);
    } else {
      out.push_back(Source::file(spec));
    }
  }
  return out;
}

std::string describe_error(const std::exception& e) {
  if (const auto* ye = dynamic_cast<const Error*>(&e)) return std::string(error_code_name(ye->code())) + ": " + e.what();
  return e.what();
}

}  // namespace yolocu
