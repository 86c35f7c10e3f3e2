// Writes the seed corpora of the fuzz harnesses (scripts/fuzz.sh --seeds; the result is committed
// under fuzz/corpus/, < 1 MB in all):
//   onnx/    hand-made graphs of every op family the engines run (Conv + SiLU, pooling, Resize,
//            the YOLOv5 Detect tail, the dynamic export's Shape/Range/Expand grid subgraph, YOLOv8's
//            Softmax/MatMul/Split, fp16), and the sample models with every convolution shrunk to
//            1/16 of its channels (same graph, same ops and attributes, a few KB of weights)
//   image/   small JPEGs (baseline, progressive, grey, EXIF orientations) and PNGs (every colour
//            type, 16-bit, interlaced), cut from the sample images
//   npy/     .npy arrays of every dtype and format version, .npz archives (stored, deflated)
//   labels/  coco128 label files and hand-made edge cases (harness format: 4 size bytes + text)
//
//   make_corpus OUT_DIR [DATA_DIR]     (DATA_DIR: the sample data; without it only hand-made cases)
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include "core/file_util.hpp"
#include "yolocu/error.hpp"
#include "yolocu/image.hpp"
#include "onnx_builder.hpp"
#include "yolocu/onnx.pb.h"
#include "yolocu/tensor.hpp"
#include "yolocu/video.hpp"
#include "yolocu/video_writer.hpp"

namespace fs = std::filesystem;
namespace pb = ::yolocu_onnx;

namespace {

std::string out_dir;
int written = 0;

void write(const std::string& sub, const std::string& name, const std::string& bytes) {
  fs::create_directories(out_dir + "/" + sub);
  std::ofstream(out_dir + "/" + sub + "/" + name, std::ios::binary) << bytes;
  ++written;
}

// ---- ONNX ------------------------------------------------------------------------------------
using yolocu::fuzz::Builder;

void onnx_seeds() {
  {  // Conv + SiLU, residual Add, MaxPool (SPPF), nearest Resize, Concat: a YOLOv5 backbone/neck in small
    Builder b(12);
    b.input("images", {1, 3, 16, 16});
    b.conv_silu("images", "c1", 3, 8, 3, 2);
    b.conv_silu("c1", "c2", 8, 8, 3, 1);
    b.node("Add", {"c1", "c2"}, {"res"});
    auto* mp = b.node("MaxPool", {"res"}, {"pool"});
    Builder::ints(mp, "kernel_shape", {5, 5});
    Builder::ints(mp, "pads", {2, 2, 2, 2});
    Builder::ints(mp, "strides", {1, 1});
    b.conv_silu("pool", "c3", 8, 4, 1, 2);
    b.init_f("scales", {4}, [](size_t j) { return j < 2 ? 1.f : 2.f; });
    auto* rs = b.node("Resize", {"c3", "", "scales"}, {"up"});
    Builder::s(rs, "mode", "nearest");
    Builder::s(rs, "coordinate_transformation_mode", "asymmetric");
    Builder::s(rs, "nearest_mode", "floor");
    auto* cat = b.node("Concat", {"up", "res"}, {"output0"});
    Builder::i(cat, "axis", 1);
    b.output("output0");
    write("onnx", "backbone.onnx", b.bytes());
  }
  {  // the YOLOv5 Detect tail, two levels (na 3, nc 1: no 6), as export.py writes it
    Builder b(12);
    b.input("images", {1, 3, 16, 16});
    b.conv_silu("images", "p3", 3, 4, 3, 2);   // 8 x 8
    b.conv_silu("p3", "p4", 4, 4, 3, 2);       // 4 x 4
    std::vector<std::string> levels;
    for (int l = 0; l < 2; ++l) {
      const std::string p = l ? "p4" : "p3", L = "l" + std::to_string(l);
      const int64_t n = l ? 4 : 8;
      b.init_f(L + ".w", {18, 4, 1, 1}, [](size_t j) { return 0.02f * static_cast<float>(j % 5); });
      b.init_f(L + ".b", {18}, [](size_t j) { return -0.1f * static_cast<float>(j % 3); });
      auto* c = b.node("Conv", {p, L + ".w", L + ".b"}, {L + ".conv"});
      Builder::ints(c, "kernel_shape", {1, 1});
      b.init_i(L + ".shape5", {1, 3, 6, n, n});
      b.node("Reshape", {L + ".conv", L + ".shape5"}, {L + ".r"});
      Builder::ints(b.node("Transpose", {L + ".r"}, {L + ".t"}), "perm", {0, 1, 3, 4, 2});
      b.node("Sigmoid", {L + ".t"}, {L + ".sig"});
      auto* sp = b.node("Split", {L + ".sig"}, {L + ".xy", L + ".wh", L + ".conf"});
      Builder::i(sp, "axis", 4);
      Builder::ints(sp, "split", {2, 2, 2});
      b.init_f(L + ".two", {}, [](size_t) { return 2.f; });
      b.init_f(L + ".grid", {1, 3, n, n, 2}, [n](size_t j) { return static_cast<float>((j / 2) % static_cast<size_t>(n)) - 0.5f; });
      b.init_f(L + ".stride", {}, [l](size_t) { return l ? 16.f : 8.f; });
      b.init_f(L + ".anchors", {1, 3, n, n, 2}, [](size_t j) { return 10.f + static_cast<float>(j % 6); });
      b.node("Mul", {L + ".xy", L + ".two"}, {L + ".xy2"});
      b.node("Add", {L + ".xy2", L + ".grid"}, {L + ".xyg"});
      b.node("Mul", {L + ".xyg", L + ".stride"}, {L + ".xys"});
      b.node("Mul", {L + ".wh", L + ".two"}, {L + ".wh2"});
      b.node("Pow", {L + ".wh2", L + ".two"}, {L + ".whp"});
      b.node("Mul", {L + ".whp", L + ".anchors"}, {L + ".wha"});
      Builder::i(b.node("Concat", {L + ".xys", L + ".wha", L + ".conf"}, {L + ".cat"}), "axis", 4);
      b.init_i(L + ".shape3", {1, 3 * n * n, 6});
      b.node("Reshape", {L + ".cat", L + ".shape3"}, {L + ".rows"});
      levels.push_back(L + ".rows");
    }
    Builder::i(b.node("Concat", levels, {"output0"}), "axis", 1);
    b.output("output0");
    auto* meta = b.m.add_metadata_props();
    meta->set_key("names");
    meta->set_value("{0: 'thing'}");
    meta = b.m.add_metadata_props();
    meta->set_key("stride");
    meta->set_value("16");
    write("onnx", "detect_tail.onnx", b.bytes());
  }
  {  // the dynamic export's shape arithmetic: Shape, Gather, Range, Cast, Unsqueeze, Concat, Expand,
     // ConstantOfShape, Equal, Where, Slice, Flatten, Squeeze
    Builder b(12);
    b.input("images", {-1, 3, -2, -3});
    b.node("Shape", {"images"}, {"shape"});
    b.init_i("i2", {2}, true);
    b.init_i("i3", {3}, true);
    Builder::i(b.node("Gather", {"shape", "i2"}, {"h"}), "axis", 0);
    Builder::i(b.node("Gather", {"shape", "i3"}, {"w"}), "axis", 0);
    b.init_i("zero", {0}, true);
    b.init_i("one", {1}, true);
    b.node("Range", {"zero", "h", "one"}, {"ry"});
    Builder::i(b.node("Cast", {"ry"}, {"ryf"}), "to", pb::TensorProto::FLOAT);
    Builder::ints(b.node("Unsqueeze", {"ryf"}, {"col"}), "axes", {1});
    Builder::ints(b.node("Unsqueeze", {"h"}, {"h1"}), "axes", {0});
    Builder::ints(b.node("Unsqueeze", {"w"}, {"w1"}), "axes", {0});
    Builder::i(b.node("Concat", {"h1", "w1"}, {"hw"}), "axis", 0);
    b.node("Expand", {"col", "hw"}, {"grid"});
    auto* cos = b.node("ConstantOfShape", {"hw"}, {"ones"});
    auto* val = cos->add_attribute();
    val->set_name("value");
    val->set_type(pb::AttributeProto::TENSOR);
    val->mutable_t()->set_data_type(pb::TensorProto::FLOAT);
    val->mutable_t()->add_dims(1);
    val->mutable_t()->add_float_data(1.f);
    b.node("Equal", {"grid", "ones"}, {"eq"});
    b.node("Where", {"eq", "grid", "ones"}, {"sel"});
    b.node("Add", {"images", "sel"}, {"output0"});
    b.init_i("st", {0});
    b.init_i("en", {INT64_MAX});
    b.init_i("ax", {3});
    b.init_i("sp", {2});
    b.node("Slice", {"images", "st", "en", "ax", "sp"}, {"sl"});
    Builder::i(b.node("Flatten", {"sl"}, {"flat"}), "axis", 2);
    b.node("Identity", {"flat"}, {"output1"});
    b.output("output0");
    b.output("output1");
    write("onnx", "dynamic_grid.onnx", b.bytes());
  }
  {  // YOLOv8 / YOLO11 ops: Softmax (DFL), MatMul (attention), Split with sizes as an input (opset 13+),
     // Transpose, Reshape with 0 / -1, elementwise and comparison ops
    Builder b(17);
    b.input("images", {1, 4, 8, 8});
    b.init_i("s1", {0, 4, -1});
    b.node("Reshape", {"images", "s1"}, {"r"});
    Builder::i(b.node("Softmax", {"r"}, {"sm"}), "axis", 1);
    Builder::ints(b.node("Transpose", {"sm"}, {"t"}), "perm", {0, 2, 1});
    b.init_f("wm", {4, 4}, [](size_t j) { return j % 5 == 0 ? 1.f : 0.1f; });
    b.node("MatMul", {"t", "wm"}, {"mm"});
    b.init_i("sizes", {1, 3});
    Builder::i(b.node("Split", {"mm", "sizes"}, {"a", "bb"}), "axis", 2);
    b.node("Relu", {"a"}, {"a1"});
    Builder::f(b.node("LeakyRelu", {"a1"}, {"a2"}), "alpha", 0.1f);
    b.node("HardSwish", {"bb"}, {"b1"});
    b.node("HardSigmoid", {"b1"}, {"b2"});
    b.node("Exp", {"b2"}, {"b3"});
    b.node("Sqrt", {"b3"}, {"b4"});
    b.node("Floor", {"b4"}, {"b5"});
    b.node("Ceil", {"b5"}, {"b6"});
    b.node("Neg", {"b6"}, {"b7"});
    b.node("Abs", {"b7"}, {"b8"});
    b.node("Max", {"b8", "b4"}, {"b9"});
    b.node("Min", {"b9", "b3"}, {"b10"});
    b.node("Sub", {"b10", "b2"}, {"b11"});
    b.node("Div", {"b11", "b3"}, {"b12"});
    b.node("Greater", {"b12", "b2"}, {"gt"});
    b.node("Less", {"b12", "b2"}, {"lt"});
    b.node("Where", {"gt", "b12", "b2"}, {"w1"});
    b.node("Where", {"lt", "w1", "b1"}, {"w2"});
    Builder::i(b.node("Concat", {"a2", "w2"}, {"cat"}), "axis", 2);
    b.init_i("ax1", {1});
    b.node("Unsqueeze", {"cat", "ax1"}, {"u"});
    b.node("Squeeze", {"u", "ax1"}, {"output0"});
    b.output("output0");
    auto* meta = b.m.add_metadata_props();
    meta->set_key("task");
    meta->set_value("detect");
    write("onnx", "v8_ops.onnx", b.bytes());
  }
  {  // an fp16 graph (export.py --half): fp16 input, weights and output; Upsample (opset 9)
    Builder b(9);
    b.input("images", {1, 3, 8, 8}, pb::TensorProto::FLOAT16);
    b.conv_silu("images", "c1", 3, 4, 3, 1, true);
    b.init_f("scales", {4}, [](size_t j) { return j < 2 ? 1.f : 2.f; });
    Builder::s(b.node("Upsample", {"c1", "scales"}, {"output0"}), "mode", "nearest");
    b.output("output0", pb::TensorProto::FLOAT16);
    write("onnx", "fp16_upsample.onnx", b.bytes());
  }
}

// The sample model with every convolution shrunk to 1/16 of its output channels (at least 1; the
// head convolutions that feed a Reshape keep theirs), weights rewritten small and deterministic.
// `symbolic_hw`: make a static input's height and width symbolic (only for graphs without
// hard-coded spatial Reshape targets, e.g. raw heads).
std::string shrink_model(const std::string& bytes, bool symbolic_hw) {
  pb::ModelProto m;
  if (!m.ParseFromString(bytes)) return "";
  pb::GraphProto* g = m.mutable_graph();
  std::map<std::string, pb::TensorProto*> inits;
  for (auto& t : *g->mutable_initializer()) inits[t.name()] = &t;
  std::map<std::string, std::vector<const pb::NodeProto*>> consumers;
  for (const auto& n : g->node())
    for (const auto& in : n.input()) consumers[in].push_back(&n);
  std::map<std::string, int64_t> ch;
  for (auto& in : *g->mutable_input()) {
    auto* sh = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    if (sh->dim_size() == 4) {
      ch[in.name()] = sh->dim(1).dim_value();
      if (symbolic_hw) {
        sh->mutable_dim(2)->set_dim_param("height");
        sh->mutable_dim(3)->set_dim_param("width");
      }
    }
  }
  auto rewrite = [](pb::TensorProto* t, std::vector<int64_t> dims) {
    t->clear_dims();
    size_t n = 1;
    for (int64_t d : dims) t->add_dims(d), n *= static_cast<size_t>(d);
    const bool fp16 = t->data_type() == pb::TensorProto::FLOAT16;
    std::string raw;
    for (size_t j = 0; j < n; ++j) {
      const float v = 0.05f * static_cast<float>(static_cast<int>(j % 7) - 3);
      if (fp16) {
        const uint16_t h = yolocu::float_to_half(v);
        raw.append(reinterpret_cast<const char*>(&h), 2);
      } else {
        raw.append(reinterpret_cast<const char*>(&v), 4);
      }
    }
    t->clear_float_data();
    t->clear_int32_data();
    t->set_raw_data(raw);
  };
  for (auto& n : *g->mutable_node()) {
    const int64_t c0 = n.input_size() && ch.count(n.input(0)) ? ch[n.input(0)] : 0;
    if (n.op_type() == "Conv" && n.input_size() >= 2 && inits.count(n.input(1)) && c0 > 0) {
      pb::TensorProto* w = inits[n.input(1)];
      if (w->dims_size() != 4) continue;
      bool head = false;
      for (const auto* c : consumers[n.output(0)]) head = head || c->op_type() == "Reshape";
      const bool graph_out = [&] {
        for (const auto& o : g->output())
          if (o.name() == n.output(0)) return true;
        return false;
      }();
      const int64_t cout = head || graph_out ? w->dims(0) : std::max<int64_t>(1, w->dims(0) / 16);
      rewrite(w, {cout, c0, w->dims(2), w->dims(3)});
      if (n.input_size() >= 3 && inits.count(n.input(2))) rewrite(inits[n.input(2)], {cout});
      for (auto& a : *n.mutable_attribute())
        if (a.name() == "group") a.set_i(1);
      ch[n.output(0)] = cout;
    } else if (n.op_type() == "Concat") {
      int64_t sum = 0;
      for (const auto& in : n.input()) sum = ch.count(in) && sum >= 0 ? sum + ch[in] : -1;
      if (sum > 0) ch[n.output(0)] = sum;
    } else if (c0 > 0 && n.output_size() == 1) {
      ch[n.output(0)] = c0;
    }
  }
  for (auto& o : *g->mutable_output()) {  // a shrunk raw head keeps its channels; spatial dims follow the input
    auto* sh = o.mutable_type()->mutable_tensor_type()->mutable_shape();
    if (symbolic_hw && sh->dim_size() == 4) {
      sh->mutable_dim(2)->set_dim_param("h_" + o.name());
      sh->mutable_dim(3)->set_dim_param("w_" + o.name());
    }
  }
  return m.SerializeAsString();
}

// ---- images ----------------------------------------------------------------------------------
struct Rgb {
  int w = 0, h = 0;
  std::vector<uint8_t> bgr;
};

Rgb gradient(int w, int h) {
  Rgb r{w, h, std::vector<uint8_t>(static_cast<size_t>(w * h * 3))};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) r.bgr[static_cast<size_t>((y * w + x) * 3 + c)] = static_cast<uint8_t>(x * 8 + y * 4 + c * 60);
  return r;
}

// Nearest-neighbour downscale of a decoded sample image to w x h.
Rgb downscale(const yolocu::Image& img, int w, int h) {
  Rgb r{w, h, std::vector<uint8_t>(static_cast<size_t>(w * h * 3))};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      std::memcpy(&r.bgr[static_cast<size_t>((y * w + x) * 3)], img.row(y * img.height() / h) + (x * img.width() / w) * 3, 3);
  return r;
}

// APP1 Exif segment (little-endian TIFF) holding one Orientation tag.
std::string exif_orientation(int orientation) {
  std::string tiff = std::string("II*\0", 4) + std::string("\x08\0\0\0", 4);  // header, IFD at 8
  tiff += std::string("\x01\0", 2);                                           // one entry
  tiff += std::string("\x12\x01\x03\0\x01\0\0\0", 8);                         // 0x0112 SHORT count 1
  tiff += static_cast<char>(orientation);
  tiff += std::string("\0\0\0", 3);
  tiff += std::string("\0\0\0\0", 4);  // next IFD: none
  return "Exif" + std::string(2, '\0') + tiff;
}

std::string encode_jpeg(const Rgb& img, bool grey, bool progressive, int orientation, int quality = 75) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(img.w);
  c.image_height = static_cast<JDIMENSION>(img.h);
  c.input_components = grey ? 1 : 3;
  c.in_color_space = grey ? JCS_GRAYSCALE : JCS_EXT_BGR;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  if (orientation) {
    const std::string app1 = exif_orientation(orientation);
    jpeg_write_marker(&c, JPEG_APP0 + 1, reinterpret_cast<const JOCTET*>(app1.data()), static_cast<unsigned>(app1.size()));
  }
  std::vector<uint8_t> row(static_cast<size_t>(img.w * 3));
  while (c.next_scanline < c.image_height) {
    const uint8_t* src = &img.bgr[static_cast<size_t>(c.next_scanline) * static_cast<size_t>(img.w) * 3];
    if (grey)
      for (int x = 0; x < img.w; ++x) row[static_cast<size_t>(x)] = src[x * 3 + 1];
    else
      std::memcpy(row.data(), src, row.size());
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  std::string out(reinterpret_cast<const char*>(buf), size);
  jpeg_destroy_compress(&c);
  std::free(buf);
  return out;
}

void png_write_cb(png_structp p, png_bytep data, png_size_t n) {
  static_cast<std::string*>(png_get_io_ptr(p))->append(reinterpret_cast<const char*>(data), n);
}

// color_type: PNG_COLOR_TYPE_*; depth 8 or 16; palette built from the pixels' high bits.
std::string encode_png(const Rgb& img, int color_type, int depth, bool interlace) {
  std::string out;
  png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(p);
  if (setjmp(png_jmpbuf(p))) {
    png_destroy_write_struct(&p, &info);
    return "";
  }
  png_set_write_fn(p, &out, png_write_cb, nullptr);
  png_set_IHDR(p, info, static_cast<png_uint_32>(img.w), static_cast<png_uint_32>(img.h), depth, color_type,
               interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  std::vector<png_color> palette(8);
  if (color_type == PNG_COLOR_TYPE_PALETTE) {
    for (int k = 0; k < 8; ++k)
      palette[static_cast<size_t>(k)] = {static_cast<png_byte>(k & 1 ? 255 : 0), static_cast<png_byte>(k & 2 ? 255 : 0),
                                         static_cast<png_byte>(k & 4 ? 255 : 0)};
    png_set_PLTE(p, info, palette.data(), 8);
  }
  png_write_info(p, info);
  const int chans = color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_PALETTE ? 1
                    : color_type == PNG_COLOR_TYPE_GRAY_ALPHA                                 ? 2
                    : color_type == PNG_COLOR_TYPE_RGB                                        ? 3
                                                                                              : 4;
  const int bpc = depth / 8;
  std::vector<std::vector<uint8_t>> rows(static_cast<size_t>(img.h), std::vector<uint8_t>(static_cast<size_t>(img.w * chans * bpc)));
  for (int y = 0; y < img.h; ++y)
    for (int x = 0; x < img.w; ++x) {
      const uint8_t* s = &img.bgr[static_cast<size_t>((y * img.w + x) * 3)];
      const uint8_t rgba[4] = {s[2], s[1], s[0], static_cast<uint8_t>(x * 16)};
      for (int c = 0; c < chans; ++c) {
        uint8_t v = color_type == PNG_COLOR_TYPE_PALETTE ? static_cast<uint8_t>((s[2] >> 7) | ((s[1] >> 7) << 1) | ((s[0] >> 7) << 2))
                    : chans <= 2 ? (c == 0 ? s[1] : rgba[3])
                                 : rgba[c];
        for (int k = 0; k < bpc; ++k) rows[static_cast<size_t>(y)][static_cast<size_t>((x * chans + c) * bpc + k)] = static_cast<uint8_t>(v ^ (k * 0x5a));
      }
    }
  std::vector<png_bytep> ptrs;
  for (auto& r : rows) ptrs.push_back(r.data());
  png_write_image(p, ptrs.data());
  png_write_end(p, nullptr);
  png_destroy_write_struct(&p, &info);
  return out;
}

void image_seeds(const std::string& data_dir) {
  std::vector<std::pair<std::string, Rgb>> sources = {{"gradient", gradient(24, 16)}};
  for (const char* name : {"bus", "zidane"}) {
    const std::string path = data_dir + "/images/" + name + ".jpg";
    if (!data_dir.empty() && fs::exists(path)) {
      const yolocu::Image img = yolocu::decode_image_file(path);
      sources.emplace_back(name, downscale(img, 40, 40 * img.height() / img.width()));
    }
  }
  for (const auto& [name, img] : sources) {
    write("image", name + ".jpg", encode_jpeg(img, false, false, 0));
    write("image", name + "_progressive.jpg", encode_jpeg(img, false, true, 0, 50));
    write("image", name + "_grey.png", encode_png(img, PNG_COLOR_TYPE_GRAY, 8, false));
    write("image", name + "_rgba16.png", encode_png(img, PNG_COLOR_TYPE_RGB_ALPHA, 16, false));
  }
  const Rgb& small = sources.back().second;
  for (int o : {2, 3, 5, 6, 8}) write("image", "exif_orientation" + std::to_string(o) + ".jpg", encode_jpeg(small, false, false, o, 40));
  write("image", "grey.jpg", encode_jpeg(small, true, false, 6, 40));
  const Rgb tiny = gradient(9, 7);
  write("image", "rgb.png", encode_png(tiny, PNG_COLOR_TYPE_RGB, 8, false));
  write("image", "rgb_interlaced.png", encode_png(tiny, PNG_COLOR_TYPE_RGB, 8, true));
  write("image", "grey_alpha.png", encode_png(tiny, PNG_COLOR_TYPE_GRAY_ALPHA, 8, false));
  write("image", "grey16.png", encode_png(tiny, PNG_COLOR_TYPE_GRAY, 16, false));
  write("image", "palette.png", encode_png(tiny, PNG_COLOR_TYPE_PALETTE, 8, false));
}

// ---- .npy / .npz -----------------------------------------------------------------------------
std::string npy(const std::string& descr, const std::string& shape, size_t data_bytes, int version = 1,
                const std::string& order = "False") {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }";
  const size_t pre = version == 1 ? 10 : 12;
  header.append((64 - (pre + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(version);
  out += '\0';
  const size_t hl = header.size();
  out += static_cast<char>(hl & 0xff);
  out += static_cast<char>((hl >> 8) & 0xff);
  if (version > 1) out += std::string(2, '\0');
  out += header;
  for (size_t i = 0; i < data_bytes; ++i) out += static_cast<char>(i * 37);
  return out;
}

void le(std::string& s, uint64_t v, int n) {
  for (int k = 0; k < n; ++k) s += static_cast<char>((v >> (8 * k)) & 0xff);
}

// A zip archive (as np.savez / np.savez_compressed write it) of the given members.
std::string zip(const std::vector<std::pair<std::string, std::string>>& members, bool deflated) {
  std::string out, cd;
  for (const auto& [name, data] : members) {
    std::string stored = data;
    if (deflated) {
      z_stream zs{};
      deflateInit2(&zs, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
      stored.resize(deflateBound(&zs, static_cast<uLong>(data.size())));
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
      zs.avail_in = static_cast<uInt>(data.size());
      zs.next_out = reinterpret_cast<Bytef*>(stored.data());
      zs.avail_out = static_cast<uInt>(stored.size());
      deflate(&zs, Z_FINISH);
      stored.resize(zs.total_out);
      deflateEnd(&zs);
    }
    const uint32_t crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    const size_t local = out.size();
    std::string h;
    le(h, 0x04034b50, 4); le(h, 20, 2); le(h, 0, 2); le(h, deflated ? 8 : 0, 2); le(h, 0, 4);
    le(h, crc, 4); le(h, stored.size(), 4); le(h, data.size(), 4); le(h, name.size(), 2); le(h, 0, 2);
    out += h + name + stored;
    std::string c;
    le(c, 0x02014b50, 4); le(c, 20, 2); le(c, 20, 2); le(c, 0, 2); le(c, deflated ? 8 : 0, 2); le(c, 0, 4);
    le(c, crc, 4); le(c, stored.size(), 4); le(c, data.size(), 4); le(c, name.size(), 2); le(c, 0, 2); le(c, 0, 2);
    le(c, 0, 2); le(c, 0, 2); le(c, 0, 4); le(c, local, 4);
    cd += c + name;
  }
  const size_t cd_off = out.size();
  out += cd;
  std::string e;
  le(e, 0x06054b50, 4); le(e, 0, 2); le(e, 0, 2); le(e, members.size(), 2); le(e, members.size(), 2);
  le(e, cd.size(), 4); le(e, cd_off, 4); le(e, 0, 2);
  return out + e;
}

void npy_seeds() {
  write("npy", "f4_2x3.npy", npy("<f4", "(2, 3)", 24));
  write("npy", "f2_4.npy", npy("<f2", "(4,)", 8));
  write("npy", "f8_scalar.npy", npy("<f8", "()", 8));
  write("npy", "i8_1x2x2.npy", npy("<i8", "(1, 2, 2)", 32, 2));
  write("npy", "i4_empty.npy", npy("<i4", "(0, 5)", 0, 3));
  write("npy", "u1_3.npy", npy("|u1", "(3,)", 3));
  write("npy", "b1_2.npy", npy("|b1", "(2,)", 2));
  write("npy", "i1_long.npy", npy("|i1", "(2L, 2L)", 4));
  write("npy", "fortran.npy", npy("<f4", "(2, 2)", 16, 1, "True"));
  const std::vector<std::pair<std::string, std::string>> members = {
      {"input.npy", npy("<f4", "(1, 3, 2, 2)", 48)}, {"detect.npy", npy("<f4", "(2, 6)", 48)}};
  write("npy", "stored.npz", zip(members, false));
  write("npy", "deflated.npz", zip(members, true));
}

// ---- labels ----------------------------------------------------------------------------------
std::string label_case(int w, int h, const std::string& text) {
  std::string s;
  le(s, static_cast<uint64_t>(w - 1), 2);
  le(s, static_cast<uint64_t>(h - 1), 2);
  return s + text;
}

void label_seeds(const std::string& data_dir) {
  const std::string dir = data_dir + "/coco128/labels/train2017";
  if (!data_dir.empty() && fs::is_directory(dir)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    int taken = 0;
    for (const auto& f : files) {
      if (fs::file_size(f) > 600 || taken == 6) continue;
      write("labels", "coco128_" + f.stem().string() + ".txt", label_case(640, 480, yolocu::detail::read_file(f.string())));
      ++taken;
    }
  }
  write("labels", "boxes.txt", label_case(640, 480, "0 0.5 0.5 0.2 0.3\n15 0.1 0.9 0.05 0.05\n0 0.5 0.5 0.2 0.3\n"));
  write("labels", "segments.txt", label_case(320, 320, "3 0.1 0.1 0.4 0.1 0.4 0.5 0.1 0.5\n1 0.2 0.2 0.3 0.3 0.25 0.4\n"));
  write("labels", "blank_lines.txt", label_case(1, 1, "\n  \n2 1 1 0 0\r\n\t7 0 0 1 1"));
  write("labels", "exponents.txt", label_case(4096, 4096, "1e2 5e-1 .5 1E-1 0.25\n"));
  write("labels", "empty.txt", label_case(64, 64, ""));
}

}  // namespace

// ---- video ------------------------------------------------------------------------------------

// Three 32x24 frames of a moving gradient through this FFmpeg's encoders into the containers a file
// source accepts: a few hundred bytes to a few KB each.
void video_seeds() {
  if (!yolocu::video_input_supported()) return;
  const std::string tmp = out_dir + "/video.tmp";
  struct Seed {
    const char* name;
    const char* encoder;  // "" the VideoWriter's default (libx264, else MPEG-4)
  };
  for (const Seed& s : {Seed{"default.mkv", ""}, Seed{"default.mp4", ""}, Seed{"mpeg4.avi", "mpeg4"},
                        Seed{"default.ts", ""}, Seed{"default.mov", ""}, Seed{"mpeg4.mkv", "mpeg4"}}) {
    try {
      yolocu::VideoWriterOptions o;
      o.encoder = s.encoder;
      const std::string path = tmp + "." + fs::path(s.name).extension().string().substr(1);
      auto w = yolocu::VideoWriter::open(path, 32, 24, 10, o);
      yolocu::Image frame(32, 24);
      for (int f = 0; f < 3; ++f) {
        for (int y = 0; y < 24; ++y)
          for (int x = 0; x < 96; ++x) frame.row(y)[x] = static_cast<uint8_t>((x * 5 + y * 9 + f * 40) & 0xff);
        w->write(frame.view());
      }
      w->close();
      write("video", s.name, yolocu::detail::read_file(path));
      fs::remove(path);
    } catch (const yolocu::Error& e) {
      std::fprintf(stderr, "make_corpus: video seed %s skipped: %s\n", s.name, e.what());
    }
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_corpus OUT_DIR [DATA_DIR]\n");
    return 2;
  }
  out_dir = argv[1];
  const std::string data_dir = argc > 2 ? argv[2] : "";
  onnx_seeds();
  if (!data_dir.empty()) {
    const std::string dyn = data_dir + "/models/yolov5n_dyn.onnx", raw = data_dir + "/models/yolov5n_raw_heads.onnx";
    if (fs::exists(dyn)) write("onnx", "yolov5n_dyn_shrunk.onnx", shrink_model(yolocu::detail::read_file(dyn), false));
    if (fs::exists(raw)) write("onnx", "yolov5n_raw_heads_shrunk.onnx", shrink_model(yolocu::detail::read_file(raw), true));
  }
  image_seeds(data_dir);
  npy_seeds();
  label_seeds(data_dir);
  video_seeds();
  std::printf("make_corpus: %d files written to %s\n", written, out_dir.c_str());
  return 0;
}
