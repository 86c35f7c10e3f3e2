// yolocu infer / yolocu inspect: the model-level tools (run an ONNX model on .npy tensors, describe it).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "args.hpp"
#include "classes_option.hpp"
#include "commands.hpp"
#include "options.hpp"
#include "paths.hpp"
#include "report.hpp"
#include "yolocu/detector.hpp"
#include "yolocu/engine.hpp"
#include "yolocu/error.hpp"
#include "yolocu/model.hpp"
#include "yolocu/npy.hpp"

namespace yolocu::cli {
namespace {

std::string dims_str(const ValueInfo& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.dims.size(); ++i) {
    if (i) s += ", ";
    s += v.dims[i].is_static() ? std::to_string(v.dims[i].value) : v.dims[i].param;
  }
  return s + "]";
}

// "x.npy", "x.npz:key" or "name=x.npy"
Tensor load_input(const std::string& spec) {
  std::string path = spec;
  const size_t eq = path.find('=');
  if (eq != std::string::npos && path.find('/') > eq) path = path.substr(eq + 1);
  const size_t colon = path.rfind(".npz:");
  if (colon != std::string::npos) {
    const std::string file = path.substr(0, colon + 4), key = path.substr(colon + 5);
    auto arrays = load_npz(file);
    auto it = arrays.find(key);
    if (it == arrays.end()) throw Error(ErrorCode::kInvalidArgument, file + " has no array '" + key + "'");
    return it->second;
  }
  return load_npy(path);
}

}  // namespace

int cmd_infer(int argc, char** argv) {
  Args args(argc, argv, 2, {"help"}, {"model", "input", "output-dir", "threads", "device", "repeat", "max-memory"});
  if (args.flag("help")) {
    std::printf(
        "usage: yolocu infer --model M.onnx --input X.npy [--input ...] --output-dir D\n"
        "                    [--threads N] [--repeat R] [--max-memory SIZE] [--device cpu]\n"
        "Runs the model on .npy tensors (one per model input, in model order; 'name=x.npy' and\n"
        "'file.npz:key' also work) and writes every model output as D/<output name>.npy (whole or not at\n"
        "all). --max-memory SIZE: the memory budget of parsing, planning and running the model.\n");
    return 0;
  }
  const std::string device = args.get("device", "cpu");
  if (device != "cpu") throw UsageError("infer: --device " + device + " is not available yet (cpu)");
  const std::string model_path = args.require("model");
  check_model_file(model_path);
  if (args.all("input").empty()) throw UsageError("infer: at least one --input is required");
  const std::string out_dir = args.require("output-dir");
  prepare_output_dir("--output-dir", out_dir);
  CpuEngineOptions opts;
  opts.num_threads = static_cast<int>(args.get_int("threads", 0));
  opts.max_memory = args.get_bytes("max-memory");
  LoadOptions lo;
  lo.max_memory = opts.max_memory;  // parsing is under the budget too, not only planning and running
  auto model = std::make_shared<Model>(load_onnx(model_path, lo));
  std::vector<Tensor> inputs;
  for (const auto& spec : args.all("input")) inputs.push_back(load_input(spec));
  CpuEngine engine(model, opts);
  const long repeat = std::max(1L, args.get_int("repeat", 1));
  std::vector<Tensor> outputs;
  std::vector<double> ms;
  for (long r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    outputs = engine.run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string name = model->graph.outputs[i].name;
    const std::string path = (std::filesystem::path(out_dir) / (name + ".npy")).string();
    save_npy(path, outputs[i]);
    std::printf("%s: %s %s -> %s\n", name.c_str(), dtype_name(outputs[i].dtype()), shape_str(outputs[i].shape()).c_str(),
                path.c_str());
  }
  const EngineStats st = engine.stats();
  std::sort(ms.begin(), ms.end());
  std::printf("prepare %.1f ms, run %.1f ms%s (median of %ld), %d nodes at run time (%d folded, %d fused), arena %.1f MiB (%.1f MiB without reuse)\n",
              st.prepare_ms, ms[ms.size() / 2], repeat > 1 ? "" : " (first run)", repeat, st.runtime_nodes,
              st.folded_nodes, st.fused_nodes, st.arena_bytes / 1048576.0, st.naive_bytes / 1048576.0);
  return 0;
}

int cmd_inspect(int argc, char** argv) {
  Args args(argc, argv, 2, detector_flag_options(), detector_valued_options());
  if (args.flag("help")) {
    std::printf(
        "usage: yolocu inspect --model M.onnx [--device cpu|cuda|cuda:N [--precision fp16|fp32] [--batch N]\n"
        "                      [--tune-batches 1 8 32] [--tactic-cache FILE|none]] [--calibration FILE]\n"
        "Prints the model family and task, inputs, outputs, opset, op counts and metadata. With --device it\n"
        "then builds the detector there and says how long that took; on the GPU also where the tactics came\n"
        "from: tuned now (a cold build) or from the tactic cache file (a warm build). The detector options of\n"
        "yolocu detect (--imgsz, --max-memory, --contexts, ...) apply to that build. --calibration FILE: what\n"
        "an INT8 calibration of this model holds (yolocu calibrate): method, images, layers kept in float;\n"
        "and what the GPU engine runs with it (--precision int8): the convolutions on INT8 kernels, those\n"
        "left in float and why, the int8 copies quantised from fp16 values.\n");
    return 0;
  }
  const std::string path = args.has("model") ? args.get("model") : (args.positional().empty() ? "" : args.positional()[0]);
  if (path.empty()) throw UsageError("inspect: --model is required");
  check_model_file(path);
  const auto model = std::make_shared<const Model>(load_onnx(path));  // parsed once: the detector shares it
  const Model& m = *model;
  std::printf("model:    %s\n", path.c_str());
  std::printf("producer: %s %s, IR version %lld, opset %lld\n", m.producer_name.c_str(), m.producer_version.c_str(),
              static_cast<long long>(m.ir_version), static_cast<long long>(m.opset));
  const ModelInfo info = model_info(m);
  std::printf("family:   %s (%s), task %s%s%s\n", family_name(info.family), info.title.c_str(), info.task.c_str(),
              info.version.empty() ? "" : ", ultralytics ", info.version.c_str());
  std::printf("          decided by: %s\n", info.family_reason.c_str());
  if (info.family == ModelFamily::kYolov8)
    std::printf("head:     anchor-free, output [batch, 4 + nc, anchors], no objectness (DFL in the graph)\n");
  if (info.imgsz_h > 0) std::printf("imgsz:    %d x %d (h x w, metadata)\n", info.imgsz_h, info.imgsz_w);
  for (const auto& v : m.graph.inputs) std::printf("input:    %s %s %s\n", v.name.c_str(), dtype_name(v.dtype), dims_str(v).c_str());
  for (const auto& v : m.graph.outputs) std::printf("output:   %s %s %s\n", v.name.c_str(), dtype_name(v.dtype), dims_str(v).c_str());
  int64_t params = 0;
  for (const auto& kv : m.graph.initializers) params += kv.second.numel();
  std::printf("weights:  %zu initializers, %lld values\n", m.graph.initializers.size(), static_cast<long long>(params));
  std::map<std::string, int> counts;
  for (const auto& n : m.graph.nodes) counts[n.op_type]++;
  std::printf("nodes:    %zu\n", m.graph.nodes.size());
  std::vector<std::string> unsupported;
  const auto& sup = supported_ops();
  for (const auto& kv : counts) {
    const bool ok = std::find(sup.begin(), sup.end(), kv.first) != sup.end();
    if (!ok) unsupported.push_back(kv.first);
    std::printf("  %-16s %4d%s\n", kv.first.c_str(), kv.second, ok ? "" : "  (not supported)");
  }
  const auto names = m.class_names();
  std::printf("stride:   %d\n", m.stride());
  std::printf("classes:  %zu", names.size());
  for (size_t i = 0; i < std::min<size_t>(names.size(), 5); ++i) std::printf("%s%s", i ? ", " : " (", names[i].c_str());
  std::printf("%s\n", names.size() > 5 ? ", ...)" : names.empty() ? "" : ")");
  for (const auto& kv : m.metadata)
    if (kv.first != "names") std::printf("metadata: %s = %s\n", kv.first.c_str(), kv.second.c_str());
  try {
    check_detection_model(info);
  } catch (const Error& e) {
    std::printf("status:   NOT runnable: %s\n", e.what());
    return 1;
  }
  if (!unsupported.empty()) {
    std::printf("status:   NOT runnable: unsupported op(s):");
    for (const auto& u : unsupported) std::printf(" %s", u.c_str());
    std::printf("\n");
    return 1;
  }
  if (m.opset < kMinOpset || m.opset > kMaxOpset) {
    std::printf("status:   NOT runnable: opset %lld outside %lld-%lld\n", static_cast<long long>(m.opset),
                static_cast<long long>(kMinOpset), static_cast<long long>(kMaxOpset));
    return 1;
  }
  std::printf("status:   runnable\n");
  if (args.has("calibration")) {
    std::printf("int8:     %s: ", args.get("calibration").c_str());
    const Int8Calibration cal = load_int8_calibration(args.get("calibration"), file_sha256(path));
    print_calibration_summary(stdout, cal);
    DetectorOptions sized;
    read_input_size(args, sized);
    print_int8_engine_plan(stdout, plan_int8_engine(m, cal, sized.input_height, sized.input_width));
  }
  if (args.has("device")) {
    DetectorOptions o = detector_options(args, PostprocessOptions{});
    for (int id : class_ids_of(class_selection(args).names, model->class_names())) o.postprocess.classes.push_back(id);
    const auto det = Detector::create(model, o);
    std::printf("build:    %s, batch %d, %s\n", device_name(det->device()), o.max_batch, describe_build(*det).c_str());
  }
  return 0;
}

}  // namespace yolocu::cli
