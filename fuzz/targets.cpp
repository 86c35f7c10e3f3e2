#include "targets.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/gpu_steps.hpp"
#include "engine/cuda/tactics/tactic_cache.hpp"
#include "engine/plan.hpp"
#include "preprocess/image_decode_plan.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/eval.hpp"
#include "yolocu/image.hpp"
#include "yolocu/letterbox.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

namespace yolocu::fuzz {

namespace {

// Concrete shapes for the model's inputs: static dims as declared, symbolic ones small (32 for
// the spatial dims of a 4-D input, 1 otherwise). Empty when an input would be too large to run
// quickly (the plan is still built for up to 2^22 input elements; the engine runs up to 2^16).
std::vector<Shape> input_shapes(const Model& m, int64_t* total) {
  std::vector<Shape> shapes;
  *total = 0;
  for (const ValueInfo& v : m.graph.inputs) {
    Shape s;
    int64_t n = 1;
    for (size_t k = 0; k < v.dims.size(); ++k) {
      const Dim& d = v.dims[k];
      const int64_t x = d.is_static() ? d.value : (v.dims.size() == 4 && k >= 2 ? 32 : 1);
      if (x <= 0 || x > (int64_t{1} << 22)) return {};
      s.push_back(x);
      n *= x;
      if (n > (int64_t{1} << 22)) return {};
    }
    *total += n;
    if (*total > (int64_t{1} << 22)) return {};
    shapes.push_back(std::move(s));
  }
  return shapes;
}

}  // namespace

void onnx_model(const uint8_t* data, size_t size) {
  try {
    auto model = std::make_shared<Model>(parse_onnx(data, size, "fuzz.onnx"));
    (void)model->class_names();
    (void)model->stride();
    try {
      check_detection_model(model_info(*model));
    } catch (const Error&) {
    }
    int64_t elements = 0;
    const std::vector<Shape> shapes = input_shapes(*model, &elements);
    if (shapes.size() != model->graph.inputs.size()) return;
    engine::PlanOptions po;
    po.max_memory = kMaxMemory;
    engine::Plan plan = engine::build_plan(*model, shapes, po);
    (void)engine::find_detect_heads(plan);
    try {  // the GPU engine's host-side planning (its kernels need a GPU)
      engine::GpuStepOptions go;
      go.fuse_detect_tail = true;
      (void)engine::plan_gpu_steps(plan, go);
    } catch (const Error&) {
    }
    if (elements > (int64_t{1} << 16)) return;
    CpuEngineOptions eo;
    eo.num_threads = 1;
    eo.max_memory = kMaxMemory;
    CpuEngine engine(model, eo);
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < shapes.size(); ++i) inputs.emplace_back(model->graph.inputs[i].dtype, shapes[i]);
    (void)engine.run(inputs);
  } catch (const Error&) {
  }
}

void image(const uint8_t* data, size_t size) {
  DecodeLimits limits;
  limits.max_width = limits.max_height = 4096;
  limits.max_pixels = int64_t{1} << 22;
  // The GPU decoder's routing (plan_gpu_decode) reads the header with the CPU decoder's code: it
  // must refuse exactly what the decoder refuses from the header, with the same message, and give
  // the decoded size of what it accepts. A disagreement aborts (a finding).
  detail::DecodePlan plan;
  std::string plan_error;
  bool planned = false;
  try {
    plan = detail::plan_gpu_decode(data, size, limits, "fuzz image");
    planned = true;
  } catch (const Error& e) {
    plan_error = e.what();
  }
  try {
    const Image img = decode_image(data, size, limits, "fuzz image");
    if (!planned) std::abort();  // the plan refused an image the decoder accepts
    if (plan.width > 0 && (plan.width != img.width() || plan.height != img.height())) std::abort();
    if (img.empty()) return;
    std::vector<uint8_t> dst(64 * 48 * 3);
    (void)letterbox_bgr(img.view(), 64, 48, dst.data());
  } catch (const Error& e) {
    if (!planned && plan_error != e.what()) std::abort();  // refused with another message
  }
}

void npy(const uint8_t* data, size_t size) {
  try {
    if (size >= 2 && data[0] == 'P' && data[1] == 'K')
      (void)parse_npz(data, size, "fuzz.npz");
    else
      (void)parse_npy(data, size, "fuzz.npy");
  } catch (const Error&) {
  }
}

void labels(const uint8_t* data, size_t size) {
  if (size < 4) return;
  const int width = 1 + ((data[0] | (data[1] << 8)) % 4096);
  const int height = 1 + ((data[2] | (data[3] << 8)) % 4096);
  try {
    const std::vector<GroundTruth> gt =
        parse_yolo_labels(std::string(reinterpret_cast<const char*>(data + 4), size - 4), width, height, "fuzz.txt");
    // The labels as detections too (a shifted copy, confidences from the order), then the metrics.
    Detections det;
    for (size_t i = 0; i < gt.size(); ++i) {
      Detection d;
      d.x1 = gt[i].x1 + static_cast<float>(i % 3);
      d.y1 = gt[i].y1;
      d.x2 = gt[i].x2;
      d.y2 = gt[i].y2 + static_cast<float>(i % 2);
      d.confidence = 1.0f / static_cast<float>(1 + i % 7);
      d.class_id = gt[i].class_id;
      det.push_back(d);
    }
    MapEvaluator ev;
    ev.add_image(det, gt);
    ev.add_image({}, gt);
    ev.add_image(det, {});
    (void)ev.compute();
  } catch (const Error&) {
  }
}

namespace {

// A file of this process's own (made once) for the cache harness, in memory (/dev/shm) where
// there is one: every save fsyncs, which costs ~15 ms on a disk and nothing there.
const std::string& cache_file() {
  // never destroyed: the exit handler below runs after function-local statics are gone
  static const std::string& path = *new std::string([] {
    const std::string dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string p = dir + "/yolocu-fuzz-cache-XXXXXX";
    const int fd = ::mkstemp(p.data());
    if (fd >= 0) ::close(fd);
    std::atexit([] {
      std::remove(cache_file().c_str());
      std::remove((cache_file() + ".lock").c_str());
    });
    return p;
  }());
  return path;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return;
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
}

}  // namespace

void tactic_cache(const uint8_t* data, size_t size) {
  using engine::TacticCache;
  const std::string& in = cache_file();
  write_file(in, data, size);
  TacticCache c("GPU");
  std::string warning;
  const bool loaded = c.load(in, &warning);
  if (!loaded && warning.empty()) __builtin_trap();  // an unusable file always says why
  for (const char* sig : {"fp16 x32 conv", "sig"})
    if (const engine::TacticRecord* r = c.find(sig, 1)) {
      std::vector<uint8_t> plan;
      if (!r->plan.empty() && !TacticCache::decode_plan(r->plan, &plan)) __builtin_trap();  // load checked it
    }
  // Saving merges into whatever the file holds: the result must load, with our entry in it.
  c.put("fuzz sig", 1, {"cudnn:GEMM", "gemm", 1.5, TacticCache::encode_plan({1, 2, 3})});
  if (!c.save(in, &warning)) return;  // e.g. /tmp full: a warning, not a finding
  TacticCache again("GPU");
  if (!again.load(in, &warning) || again.find("fuzz sig", 1) == nullptr || again.size() < c.size()) __builtin_trap();
  // another device's entries saved into it are kept beside
  TacticCache other("GPU 2");
  other.put("x", 2, {"own:conv", "", 0});
  if (other.save(in, &warning) && (!again.load(in, &warning) || again.find("fuzz sig", 1) == nullptr)) __builtin_trap();
}

Target target(const std::string& name) {
  if (name == "tactic_cache") return tactic_cache;
  if (name == "onnx") return onnx_model;
  if (name == "image") return image;
  if (name == "npy") return npy;
  if (name == "labels") return labels;
  if (name == "video") return video;
  if (name == "source_list") return source_list;
  if (name == "triton_request") return triton_request;
  return nullptr;
}

}  // namespace yolocu::fuzz
