// The yolocu Triton backend's entry points (Triton's C backend API): backend, model and instance
// life cycle, and execution. Everything here turns exceptions into Triton errors; nothing throws
// across the C boundary.
#include <filesystem>
#include <string>

#include "triton/backend_state.hpp"
#include "triton/log.hpp"
#include "triton/metrics.hpp"
#include "triton/triton_api.hpp"
#include "yolocu/error.hpp"
#include "yolocu/model.hpp"
#if defined(YOLOCU_WITH_CUDA)
#include "yolocu/image_decode_cuda.hpp"
#endif

namespace yt = yolocu::triton;

namespace {

template <typename F>
TRITONSERVER_Error* guarded(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return yt::to_triton_error(e);
  } catch (...) {
    return yt::make_error(TRITONSERVER_ERROR_INTERNAL, "unknown exception");
  }
}

std::string json_of(TRITONSERVER_Message* message) {
  const char* base = nullptr;
  size_t size = 0;
  TRITONSERVER_Error* err = TRITONSERVER_MessageSerializeToJson(message, &base, &size);
  std::string json = err ? std::string() : std::string(base, size);
  TRITONSERVER_MessageDelete(message);
  if (err) {
    const std::string msg = TRITONSERVER_ErrorMessage(err);
    TRITONSERVER_ErrorDelete(err);
    throw yolocu::Error(yolocu::ErrorCode::kInternal, "model config: " + msg);
  }
  return json;
}

bool build_has_nvjpeg() {
#if defined(YOLOCU_WITH_CUDA)
  return yolocu::nvjpeg_available();
#else
  return false;
#endif
}

#define YT_RETURN_IF_ERROR(call)          \
  do {                                    \
    TRITONSERVER_Error* e_ = (call);      \
    if (e_ != nullptr) return e_;         \
  } while (false)

// The model's ONNX file and configuration, and the model parsed.
TRITONSERVER_Error* load_model_state(TRITONBACKEND_Model* model, yt::ModelState& s) {
  const char* name = nullptr;
  uint64_t version = 0;
  const char* location = nullptr;
  TRITONBACKEND_ArtifactType artifact{};
  TRITONSERVER_Message* message = nullptr;
  YT_RETURN_IF_ERROR(TRITONBACKEND_ModelName(model, &name));
  YT_RETURN_IF_ERROR(TRITONBACKEND_ModelVersion(model, &version));
  YT_RETURN_IF_ERROR(TRITONBACKEND_ModelRepository(model, &artifact, &location));
  YT_RETURN_IF_ERROR(TRITONBACKEND_ModelConfig(model, 1, &message));
  s.name = name;
  s.config = yt::parse_backend_config(json_of(message));
  if (artifact != TRITONBACKEND_ARTIFACT_FILESYSTEM)
    return yt::make_error(TRITONSERVER_ERROR_UNSUPPORTED, "the yolocu backend reads models from a file system repository");
  // A file of the version folder, or the error naming it when it is not there.
  const std::filesystem::path dir = std::filesystem::path(location) / std::to_string(version);
  auto missing = [&](const std::string& file) -> TRITONSERVER_Error* {
    if (std::filesystem::is_regular_file(dir / file)) return nullptr;
    return yt::make_error(TRITONSERVER_ERROR_NOT_FOUND,
                          "model " + s.name + ": no file " + std::to_string(version) + "/" + file + " in its folder");
  };
  YT_RETURN_IF_ERROR(missing(s.config.model_file));
  s.onnx_path = (dir / s.config.model_file).string();
  // Parsed once per model; every instance builds its detector from it. The family's defaults (iou
  // when the config names none) are resolved by Detector::create.
  s.model = std::make_shared<const yolocu::Model>(yolocu::load_onnx(s.onnx_path));
  yolocu::check_detection_model(yolocu::model_info(*s.model));
  if (s.config.precision == yolocu::Precision::kInt8) {
    YT_RETURN_IF_ERROR(missing(s.config.calibration_file));
    s.calibration = std::make_shared<const yolocu::Int8Calibration>(
        yolocu::load_int8_calibration((dir / s.config.calibration_file).string(), yolocu::file_sha256(s.onnx_path)));
  }
  return nullptr;
}

}  // namespace

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  (void)backend;
  uint32_t major = 0, minor = 0;
  YT_RETURN_IF_ERROR(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major != yt::kBackendApiMajor || minor < yt::kBackendApiMinor) {
    const std::string msg = "the yolocu backend needs Triton's backend API " + std::to_string(yt::kBackendApiMajor) + "." +
                            std::to_string(yt::kBackendApiMinor) + " or a newer minor version; this server has " +
                            std::to_string(major) + "." + std::to_string(minor);
    yt::log_error(msg);
    return yt::make_error(TRITONSERVER_ERROR_UNSUPPORTED, msg);
  }
  yt::log_info("backend API " + std::to_string(major) + "." + std::to_string(minor));
  yt::metrics_init();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend) {
  (void)backend;
  yt::metrics_finalize();
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return guarded([&]() -> TRITONSERVER_Error* {
    auto state = std::make_unique<yt::ModelState>();
    YT_RETURN_IF_ERROR(load_model_state(model, *state));
    yt::log_info("model " + state->name + ": " + std::filesystem::path(state->onnx_path).filename().string() +
                 ", max_batch_size " + std::to_string(state->config.max_batch_size));
    YT_RETURN_IF_ERROR(TRITONBACKEND_ModelSetState(model, state.get()));
    state.release();
    return nullptr;
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* p = nullptr;
  YT_RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &p));
  delete static_cast<yt::ModelState*>(p);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  return guarded([&]() -> TRITONSERVER_Error* {
    const char* name = nullptr;
    TRITONSERVER_InstanceGroupKind kind{};
    int32_t device_id = 0;
    TRITONBACKEND_Model* model = nullptr;
    void* model_state = nullptr;
    YT_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceName(instance, &name));
    YT_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceKind(instance, &kind));
    YT_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceDeviceId(instance, &device_id));
    YT_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
    YT_RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &model_state));
    if (kind != TRITONSERVER_INSTANCEGROUPKIND_GPU && kind != TRITONSERVER_INSTANCEGROUPKIND_CPU)
      return yt::make_error(TRITONSERVER_ERROR_INVALID_ARG, "instance " + std::string(name) + ": the yolocu backend runs KIND_GPU or KIND_CPU instances");
    auto state = std::make_unique<yt::InstanceState>();
    state->name = name;
    state->instance = instance;
    state->model = static_cast<yt::ModelState*>(model_state);
    const bool gpu = kind == TRITONSERVER_INSTANCEGROUPKIND_GPU;
    yolocu::DetectorOptions opt = yt::detector_options(state->model->config, gpu, device_id, build_has_nvjpeg());
    opt.int8_calibration = state->model->calibration;
    state->detector = yolocu::Detector::create(state->model->model, opt);
    state->detector->warm_up();
    state->slow_pinned = yt::pinned_allocation_counts();
    if (state->model->config.response_thread) state->responses = std::make_unique<yt::ResponseQueue>();
    yt::log_info("instance " + state->name + ": " + (gpu ? "GPU " + std::to_string(device_id) : std::string("CPU")) +
                 ", decode " + yolocu::decode_device_name(opt.decode) + ", built in " +
                 std::to_string(static_cast<int>(state->detector->build_info().build_ms)) + " ms");
    YT_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceSetState(instance, state.get()));
    state.release();
    return nullptr;
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* p = nullptr;
  YT_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &p));
  delete static_cast<yt::InstanceState*>(p);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests, uint32_t request_count) {
  void* p = nullptr;
  YT_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &p));
  // Every request is answered and released inside, whatever happens: the call itself succeeds.
  yt::execute(*static_cast<yt::InstanceState*>(p), requests, request_count);
  return nullptr;
}

}  // extern "C"
