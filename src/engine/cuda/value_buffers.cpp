#include "engine/cuda/value_buffers.hpp"

#include <algorithm>

namespace yolocu::cuda_engine_internal {

void ValueBuffers::upload_const(int id, detail::DeviceBudget* budget, CudaEngineStats& stats) {
  if (id < 0 || !val(id).constant || consts_.count(id)) return;
  const Tensor& t = val(id).value;
  YOLOCU_CHECK(t.dtype() == DType::kFloat32, kUnsupported, "GPU engine: constant '", val(id).name, "' of type ",
               dtype_name(t.dtype()), " used at run time");
  DeviceMem m = device_alloc(std::max<size_t>(t.nbytes(), 4), "constants", budget);
  if (t.nbytes()) YOLOCU_CUDA_CHECK(cudaMemcpy(m.get(), t.data(), t.nbytes(), cudaMemcpyHostToDevice));
  stats.weight_bytes += t.nbytes();
  consts_.emplace(id, std::move(m));
}

}  // namespace yolocu::cuda_engine_internal
