#include "image_outputs.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>

#include "json_out.hpp"
#include "yolocu/annotate.hpp"
#include "yolocu/error.hpp"
#include "yolocu/npy.hpp"

namespace yolocu::cli {
namespace fs = std::filesystem;
namespace {

// Image `slot` of a batched tensor (dim 0), as a [1, ...] copy.
Tensor batch_slice(const Tensor& t, size_t slot) {
  Shape s = t.shape();
  const size_t per = t.nbytes() / static_cast<size_t>(s.at(0));
  s[0] = 1;
  Tensor out(t.dtype(), s);
  std::memcpy(out.data(), static_cast<const uint8_t*>(t.data()) + slot * per, per);
  return out;
}

std::string summary_line(const ImageResult& r, const std::vector<std::string>& names) {
  std::map<int, int> counts;
  for (const Detection& d : r.detections) counts[d.class_id]++;
  std::string s = r.path + ": " + std::to_string(r.width) + "x" + std::to_string(r.height);
  if (counts.empty()) return s + " (no detections)";
  for (const auto& [c, k] : counts) s += " " + std::to_string(k) + " " + class_name(names, c) + ",";
  s.pop_back();
  return s;
}

// A class name as a folder name: '/' and NUL replaced, "", "." and ".." made "_".
std::string folder_name(std::string name) {
  for (char& c : name)
    if (c == '/' || c == '\0') c = '_';
  return name.empty() || name == "." || name == ".." ? "_" : name;
}

void make_dirs(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorCode::kIo, dir.string() + ": cannot create the folder: " + ec.message());
}

// ultralytics' increment_path for a file: `dir/stem.jpg`, else dir/stem2.jpg, stem3.jpg, ...
fs::path free_file(const fs::path& dir, const std::string& stem) {
  std::error_code ec;
  fs::path p = dir / (stem + ".jpg");
  for (int n = 2; fs::exists(fs::symlink_status(p, ec)) && n < 100000; ++n) p = dir / (stem + std::to_string(n) + ".jpg");
  return p;
}

}  // namespace

std::string yolo_txt(const ImageResult& r, bool with_conf) {
  std::string s;
  const float w = static_cast<float>(r.width), h = static_cast<float>(r.height);
  for (auto it = r.detections.rbegin(); it != r.detections.rend(); ++it) {
    const float x1 = std::nearbyint(it->x1), y1 = std::nearbyint(it->y1);
    const float x2 = std::nearbyint(it->x2), y2 = std::nearbyint(it->y2);
    const float cx = (x1 + x2) / 2.f / w, cy = (y1 + y2) / 2.f / h;
    const float bw = (x2 - x1) / w, bh = (y2 - y1) / h;
    char buf[160];
    if (with_conf)
      std::snprintf(buf, sizeof buf, "%d %g %g %g %g %g\n", it->class_id, static_cast<double>(cx), static_cast<double>(cy),
                    static_cast<double>(bw), static_cast<double>(bh), static_cast<double>(it->confidence));
    else
      std::snprintf(buf, sizeof buf, "%d %g %g %g %g\n", it->class_id, static_cast<double>(cx), static_cast<double>(cy),
                    static_cast<double>(bw), static_cast<double>(bh));
    s += buf;
  }
  return s;
}

CropRect save_one_box_rect(const Detection& d, int width, int height) {
  // xyxy2xywh, wh * gain + pad, xywh2xyxy, .long() (truncation), clip_boxes: all in float32 as torch does
  const float cx = (d.x1 + d.x2) / 2.f, cy = (d.y1 + d.y2) / 2.f;
  const float w = (d.x2 - d.x1) * 1.02f + 10.f, h = (d.y2 - d.y1) * 1.02f + 10.f;
  const auto whole = [](float v, int hi) {
    const double t = std::trunc(static_cast<double>(v));
    return static_cast<int>(std::min<double>(std::max<double>(t, 0.0), hi));
  };
  CropRect c;
  c.x0 = whole(cx - w / 2.f, width), c.x1 = whole(cx + w / 2.f, width);
  c.y0 = whole(cy - h / 2.f, height), c.y1 = whole(cy + h / 2.f, height);
  return c;
}

void ImageOutputs::write_crops(const ImageResult& r, const ImageView& image, const std::string& stem) const {
  for (const Detection& d : r.detections) {  // in the detector's order, as ultralytics' Results.boxes
    const CropRect c = save_one_box_rect(d, image.width, image.height);
    if (c.x1 <= c.x0 || c.y1 <= c.y0) continue;  // nothing inside the image
    const fs::path dir = fs::path(run_dir) / "crops" / folder_name(class_name(*names, d.class_id));
    make_dirs(dir);
    const ImageView crop{image.data + static_cast<size_t>(c.y0) * image.pitch_bytes + static_cast<size_t>(c.x0) * 3,
                         c.x1 - c.x0, c.y1 - c.y0, image.pitch_bytes};
    write_jpeg(free_file(dir, stem).string(), crop);
  }
}

void ImageOutputs::write(const ImageResult& r, const ImageView& image, const DetectionTrace* trace, size_t slot,
                         const std::string& stem) {
  if (!r.error.empty()) return;
  if (verbose) std::printf("%s\n", summary_line(r, *names).c_str());
  if (save_txt && !r.detections.empty()) {
    write_text((fs::path(run_dir) / "labels" / (stem + ".txt")).string(), yolo_txt(r, save_conf));
    labels_++;
  }
  if (save_crop) write_crops(r, image, stem);
  if (save_img) {
    Image copy(image.width, image.height);
    for (int y = 0; y < image.height; ++y)
      std::memcpy(copy.row(y), image.data + static_cast<size_t>(y) * image.pitch_bytes, static_cast<size_t>(image.width) * 3);
    draw_detections(copy, r.detections, *names);
    // PNG inputs stay lossless (Python's Results.plot() gives the same pixels), others are JPEGs
    std::string ext = fs::path(r.path).extension().string();
    for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    write_image((fs::path(run_dir) / (stem + (ext == ".png" ? ".png" : ".jpg"))).string(), copy.view());
  }
  if (trace) {
    const fs::path base = fs::path(dump_dir) / stem;
    save_npy(base.string() + "_letterboxed.npy", trace->letterboxed.at(slot));
    save_npy(base.string() + "_input.npy", batch_slice(trace->input, slot));
    for (size_t k = 0; k < trace->outputs.size(); ++k)
      save_npy(base.string() + "_output" + std::to_string(k) + ".npy", batch_slice(trace->outputs[k], slot));
    save_npy(base.string() + "_candidates.npy", trace->candidates.at(slot));
  }
}

}  // namespace yolocu::cli
