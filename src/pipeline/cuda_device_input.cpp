// The CUDA detector's DeviceImage input (see the header).
#include "pipeline/cuda_device_input.hpp"

#include <algorithm>
#include <string>

#include "core/check.hpp"
#include "core/cuda_check.hpp"
#include "yolocu/letterbox_image_cuda.hpp"

namespace yolocu::detail {
namespace {

void check_on_device(const void* p, int cuda_device, size_t i, const char* plane) {
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) (void)cudaGetLastError();
  if (e == cudaSuccess && (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) &&
      attr.device == cuda_device)
    return;
  // what the runtime says, for the message (type 0: unregistered host memory, 1: pinned host memory)
  const std::string found = e != cudaSuccess ? std::string(cudaGetErrorString(e))
                                             : "memory type " + std::to_string(static_cast<int>(attr.type)) +
                                                   " on device " + std::to_string(attr.device);
  detail::fail(ErrorCode::kInvalidArgument, "detect_device: the ", plane, " of image ", i,
               " is not in memory of CUDA device ", cuda_device, " (cudaPointerGetAttributes: ", found, ")");
}

}  // namespace

DeviceImageInput::DeviceImageInput() {
  YOLOCU_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
}

DeviceImageInput::~DeviceImageInput() {
  if (ready_) cudaEventDestroy(ready_);
  cudaFreeHost(h_descs_);
  cudaFree(d_descs_);
}

void DeviceImageInput::reserve(int n) {
  if (static_cast<size_t>(n) > capacity_) {
    cudaFreeHost(h_descs_);
    cudaFree(d_descs_);
    h_descs_ = d_descs_ = nullptr;
    capacity_ = 0;
    const size_t bytes = sizeof(DeviceLetterboxDesc) * static_cast<size_t>(n);
    YOLOCU_CUDA_CHECK(cudaHostAlloc(&h_descs_, bytes, cudaHostAllocDefault));
    YOLOCU_CUDA_CHECK(cudaMalloc(&d_descs_, bytes));
    capacity_ = static_cast<size_t>(n);
  }
}

void DeviceImageInput::letterbox(const DeviceImage* images, int n, int cuda_device, int dst_w, int dst_h,
                                 DType dtype, LetterboxMode mode, void* d_input, cudaStream_t stream,
                                 std::vector<LetterboxGeometry>& geoms) {
  reserve(n);
  geoms.assign(static_cast<size_t>(n), LetterboxGeometry{});
  auto* descs = static_cast<DeviceLetterboxDesc*>(h_descs_);
  std::vector<CUstream_st*> waited;
  for (int i = 0; i < n; ++i) {
    const DeviceImage& im = images[i];
    check_on_device(im.data, cuda_device, static_cast<size_t>(i), im.format == PixelFormat::kNv12 ? "luma plane" : "data");
    if (im.format == PixelFormat::kNv12) check_on_device(im.chroma, cuda_device, static_cast<size_t>(i), "chroma plane");
    descs[i] = make_device_letterbox_desc(im, dst_w, dst_h, &geoms[static_cast<size_t>(i)], "detect_device");
    // The producer's work first: an event on its stream, waited for on ours (no host wait).
    if (std::find(waited.begin(), waited.end(), im.stream) == waited.end() && im.stream != stream) {
      YOLOCU_CUDA_CHECK(cudaEventRecord(ready_, im.stream));
      YOLOCU_CUDA_CHECK(cudaStreamWaitEvent(stream, ready_, 0));
      waited.push_back(im.stream);
    }
  }
  YOLOCU_CUDA_CHECK(cudaMemcpyAsync(d_descs_, descs, sizeof(DeviceLetterboxDesc) * static_cast<size_t>(n),
                                    cudaMemcpyHostToDevice, stream));
  letterbox_images_cuda(static_cast<const DeviceLetterboxDesc*>(d_descs_), n, dst_w, dst_h, dtype, mode, d_input,
                        stream);
}

}  // namespace yolocu::detail
