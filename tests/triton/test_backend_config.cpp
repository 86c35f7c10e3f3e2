// The Triton backend's model configuration (config.pbtxt as the JSON Triton hands the backend).
#include <gtest/gtest.h>

#include <string>

#include "triton/backend_config.hpp"
#include "yolocu/error.hpp"

namespace yt = yolocu::triton;

namespace {

std::string with_params(const std::string& params, int max_batch = 8) {
  return R"({"name": "m", "backend": "yolocu", "max_batch_size": )" + std::to_string(max_batch) +
         R"(, "parameters": {)" + params + "}}";
}

std::string param(const std::string& name, const std::string& value) {
  return "\"" + name + "\": {\"string_value\": \"" + value + "\"}";
}

std::string error_of(const std::string& json) {
  try {
    yt::parse_backend_config(json);
  } catch (const yolocu::Error& e) {
    EXPECT_EQ(e.code(), yolocu::ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

}  // namespace

TEST(TritonConfig, DefaultsLeaveIouToTheModelFamily) {
  const yt::BackendConfig c = yt::parse_backend_config(R"({"max_batch_size": 16})");
  EXPECT_EQ(c.max_batch_size, 16);
  EXPECT_EQ(c.postprocess.iou_threshold, yolocu::kFamilyDefault);
  EXPECT_FLOAT_EQ(c.postprocess.conf_threshold, 0.25f);
  EXPECT_EQ(c.model_file, "model.onnx");
  EXPECT_EQ(c.precision, yolocu::Precision::kFloat16);
  EXPECT_EQ(c.decode, "auto");
}

TEST(TritonConfig, ReadsEveryParameter) {
  const yt::BackendConfig c = yt::parse_backend_config(with_params(
      param("precision", "fp32") + "," + param("conf", "0.4") + "," + param("iou", "0.6") + "," + param("max_det", "50") + "," +
      param("classes", "0, 2,7") + "," + param("agnostic", "true") + "," + param("tactic_cache", "none") + "," +
      param("decode", "cpu") + "," + param("engine_graphs", "off") + "," + param("max_pixels", "1000000") + "," +
      param("max_image_side", "4096") + "," + param("max_request_bytes", "1048576") + "," + param("contexts", "2") + "," +
      param("model_file", "yolov8n.onnx") + "," + param("imgsz", "384,640") + "," + param("cpu_threads", "3") + "," +
      param("slow_execution_ms", "25") + "," + param("blocking_sync", "true") + "," + param("fast_start", "true") + "," +
      param("response_thread", "false")));
  const yt::BackendConfig segmented =
      yt::parse_backend_config(with_params(param("engine_graphs", "on") + "," + param("engine_graph_segments", "8")));
  EXPECT_EQ(segmented.engine_graph_segments, 8);
  EXPECT_EQ(yt::detector_options(segmented, true, 0, true).engine_graph_segments, 8);
  EXPECT_EQ(c.precision, yolocu::Precision::kFloat32);
  EXPECT_FLOAT_EQ(c.postprocess.conf_threshold, 0.4f);
  EXPECT_FLOAT_EQ(c.postprocess.iou_threshold, 0.6f);
  EXPECT_EQ(c.postprocess.max_det, 50);
  EXPECT_EQ(c.postprocess.classes, (std::vector<int>{0, 2, 7}));
  EXPECT_TRUE(c.postprocess.agnostic);
  EXPECT_EQ(c.tactic_cache, "none");
  EXPECT_EQ(c.decode, "cpu");
  EXPECT_EQ(c.engine_graphs, "off");
  EXPECT_EQ(c.decode_limits.max_pixels, 1000000);
  EXPECT_EQ(c.decode_limits.max_width, 4096);
  EXPECT_EQ(c.decode_limits.max_height, 4096);
  EXPECT_EQ(c.max_request_bytes, 1048576u);
  EXPECT_EQ(c.contexts, 2);
  EXPECT_EQ(c.model_file, "yolov8n.onnx");
  EXPECT_EQ(c.input_height, 384);
  EXPECT_EQ(c.input_width, 640);
  EXPECT_EQ(c.cpu_threads, 3);
  EXPECT_EQ(c.slow_execution_ms, 25);
  EXPECT_TRUE(c.blocking_sync);
  const yolocu::DetectorOptions o = yt::detector_options(c, false, 0, false);
  EXPECT_TRUE(o.blocking_sync);
  EXPECT_TRUE(c.fast_start);
  EXPECT_TRUE(o.fast_start);
  EXPECT_FALSE(yt::detector_options(yt::parse_backend_config(with_params("")), true, 0, true).fast_start) << "off by default";
  EXPECT_FALSE(c.response_thread);
  EXPECT_TRUE(yt::parse_backend_config(with_params("")).response_thread) << "on by default";
  EXPECT_NE(error_of(with_params(param("response_thread", "1"))).find("response_thread = '1' must be one of true, false"),
            std::string::npos);
  EXPECT_EQ(o.input_height, 384);
  EXPECT_EQ(o.input_width, 640);
  EXPECT_EQ(o.cpu_threads, 3);
}

TEST(TritonConfig, RefusesBadValuesByName) {
  EXPECT_NE(error_of(with_params(param("conf", "1.5"))).find("conf = '1.5' must be in [0, 1]"), std::string::npos);
  EXPECT_NE(error_of(with_params(param("iou", "abc"))).find("iou = 'abc' is not a number"), std::string::npos);
  EXPECT_NE(error_of(with_params(param("max_det", "2.5"))).find("max_det = '2.5' must be an integer"), std::string::npos);
  // numbers beyond int64 are refused before any conversion (found by the triton_request harness:
  // 1e48 was cast to int64 first, undefined behaviour)
  for (const char* v : {"1e48", "-1e300", "inf", "nan", "9.3e18"})
    EXPECT_NE(error_of(with_params(param("max_request_bytes", v))).find("must be an integer"), std::string::npos) << v;
  EXPECT_NE(error_of(with_params(param("precision", "int4"))).find("must be one of fp16, fp32, int8"), std::string::npos);
  EXPECT_NE(error_of(with_params(param("classes", "1,,2"))).find("empty entry"), std::string::npos);
  EXPECT_NE(error_of(with_params(param("model_file", "../x.onnx"))).find("a file name in the version folder"), std::string::npos);
  EXPECT_NE(error_of(with_params(param("imgsz", "100"))).find("multiples of 32"), std::string::npos);
  EXPECT_NE(error_of(with_params(param("slow_execution_ms", "-1"))).find("slow_execution_ms"), std::string::npos);
  EXPECT_NE(error_of(with_params(param("blocking_sync", "yes"))).find("blocking_sync = 'yes' must be one of true, false"),
            std::string::npos);
  EXPECT_NE(error_of(with_params(param("fast_start", "1"))).find("fast_start = '1' must be one of true, false"),
            std::string::npos);
  EXPECT_NE(error_of(with_params(param("engine_graph_segments", "65"))).find("must be an integer in [1, 64]"), std::string::npos);
  EXPECT_NE(error_of(with_params(param("engine_graphs", "off") + "," + param("engine_graph_segments", "4")))
                .find("engine_graph_segments goes with engine_graphs = 'on'"),
            std::string::npos);
  EXPECT_NE(error_of(with_params(param("confidence", "0.5"))).find("unknown parameter 'confidence'"), std::string::npos);
  EXPECT_NE(error_of(R"({"max_batch_size": 0})").find("max_batch_size must be an integer in [1, 256]"), std::string::npos);
  EXPECT_NE(error_of(R"({"name": "m"})").find("max_batch_size must be set"), std::string::npos);
  EXPECT_NE(error_of("{").find("not JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"max_batch_size": 4, "parameters": {"conf": 3}})").find("conf has no string_value"), std::string::npos);
}

// precision int8 (simulated INT8 on CPU instances) names its calibration file, and only then.
TEST(TritonConfig, Int8NeedsItsCalibration) {
  const yt::BackendConfig c = yt::parse_backend_config(with_params(param("precision", "int8") + ", " +
                                                                   param("calibration", "calibration.json")));
  EXPECT_EQ(c.precision, yolocu::Precision::kInt8);
  EXPECT_EQ(c.calibration_file, "calibration.json");
  EXPECT_NE(error_of(with_params(param("precision", "int8"))).find("needs the parameter calibration"), std::string::npos);
  EXPECT_NE(error_of(with_params(param("calibration", "c.json"))).find("goes with precision = 'int8'"), std::string::npos);
  EXPECT_NE(error_of(with_params(param("precision", "int8") + ", " + param("calibration", "../c.json")))
                .find("a file name in the version folder"),
            std::string::npos);
}

TEST(TritonConfig, DetectorOptionsPerInstanceKind) {
  yt::BackendConfig c = yt::parse_backend_config(with_params(param("iou", "0.5") + "," + param("contexts", "2"), 16));
  const yolocu::DetectorOptions gpu = yt::detector_options(c, true, 1, true);
  EXPECT_EQ(gpu.device, yolocu::Device::kCuda);
  EXPECT_EQ(gpu.cuda_device, 1);
  EXPECT_EQ(gpu.max_batch, 16);
  EXPECT_EQ(gpu.contexts, 2);
  EXPECT_EQ(gpu.decode, yolocu::DecodeDevice::kGpu);
  EXPECT_TRUE(gpu.engine_graphs);  // graphs by default, beside nvJPEG too
  EXPECT_EQ(gpu.engine_graph_segments, 1);
  const yolocu::DetectorOptions gpu_no_nvjpeg = yt::detector_options(c, true, 0, false);
  EXPECT_EQ(gpu_no_nvjpeg.decode, yolocu::DecodeDevice::kCpu);
  EXPECT_TRUE(gpu_no_nvjpeg.engine_graphs);
  const yolocu::DetectorOptions cpu = yt::detector_options(c, false, 0, true);
  EXPECT_EQ(cpu.device, yolocu::Device::kCpu);
  EXPECT_EQ(cpu.decode, yolocu::DecodeDevice::kCpu);
  EXPECT_EQ(cpu.contexts, 1);
  EXPECT_FLOAT_EQ(cpu.postprocess.iou_threshold, 0.5f);
  c.decode = "gpu";
  EXPECT_THROW(yt::detector_options(c, false, 0, true), yolocu::Error);
}
