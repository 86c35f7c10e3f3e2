// cuDNN's own INT8 convolution, for bench_conv_int8 --cudnn: cudnnConvolutionForward on NHWC int8
// tensors with int32 accumulation, int8 out (cuDNN's INT8_CONFIG) or float out (INT8_EXT_CONFIG),
// every forward algorithm cuDNN accepts for the shape timed; the fastest is reported. Channels must
// be multiples of 4 (cuDNN's rule for these configurations). The output is scaled by `alpha` (the
// product of the input and weight scales over the output's, for int8 out); no bias, no activation:
// the convolution's own cost, to set against the FP16 tactics and yolocu's INT8 kernel. An algorithm
// whose launch fails (at once, at the synchronisation after it, or in the timed launches) or whose
// time is under that of reading its tensors once at 5 TB/s (more than the GPU's memory gives: it
// ran nothing) is left out, with the reason in `why` when none remains.
#pragma once

#include <cuda_runtime.h>
#include <cudnn.h>

#include <functional>
#include <string>

#include "bench_util.hpp"

namespace yolocu::bench {

struct CudnnInt8Result {
  std::string algo;  // empty: cuDNN ran none (why says so)
  std::string why;
  EventTiming t{};
};

// x: n x h x w x c int8, w: k x r x s x c int8, y: n x p x q x k int8 (float_out: float).
// `time` times a launch the way the bench times every other one.
inline CudnnInt8Result cudnn_int8_conv(cudnnHandle_t h, int n, int c, int hh, int ww, int k, int r, int s, int pad,
                                       int stride, const void* x, const void* w, void* y, bool float_out, void* ws,
                                       size_t ws_bytes, const std::function<EventTiming(const std::function<void()>&)>& time) {
  CudnnInt8Result res;
  cudnnTensorDescriptor_t xd = nullptr, yd = nullptr;
  cudnnFilterDescriptor_t wd = nullptr;
  cudnnConvolutionDescriptor_t cd = nullptr;
  auto done = [&](const std::string& why) {
    if (!why.empty() && res.algo.empty()) res.why = why;
    if (xd) cudnnDestroyTensorDescriptor(xd);
    if (yd) cudnnDestroyTensorDescriptor(yd);
    if (wd) cudnnDestroyFilterDescriptor(wd);
    if (cd) cudnnDestroyConvolutionDescriptor(cd);
    return res;
  };
  if (c % 4 != 0 || k % 4 != 0) return done("channels not a multiple of 4");
  if (cudnnCreateTensorDescriptor(&xd) != CUDNN_STATUS_SUCCESS || cudnnCreateTensorDescriptor(&yd) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateFilterDescriptor(&wd) != CUDNN_STATUS_SUCCESS || cudnnCreateConvolutionDescriptor(&cd) != CUDNN_STATUS_SUCCESS)
    return done("descriptors");
  const int p = (hh + 2 * pad - r) / stride + 1, q = (ww + 2 * pad - s) / stride + 1;
  if (cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_INT8, n, c, hh, ww) != CUDNN_STATUS_SUCCESS ||
      cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_INT8, CUDNN_TENSOR_NHWC, k, c, r, s) != CUDNN_STATUS_SUCCESS ||
      cudnnSetConvolution2dDescriptor(cd, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_INT32) !=
          CUDNN_STATUS_SUCCESS ||
      cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NHWC, float_out ? CUDNN_DATA_FLOAT : CUDNN_DATA_INT8, n, k, p, q) !=
          CUDNN_STATUS_SUCCESS)
    return done("descriptors refused");
  const float alpha = 1e-3f, beta = 0;
  const double bytes = static_cast<double>(n) * hh * ww * c + static_cast<double>(k) * r * s * c +
                       static_cast<double>(n) * p * q * k * (float_out ? 4 : 1);
  const double floor_ms = bytes / 5e12 * 1e3;
  std::string refusals;
  for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
    const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(a);
    size_t need = 0;
    cudnnStatus_t st = cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, algo, &need);
    if (st == CUDNN_STATUS_SUCCESS && need > ws_bytes) st = CUDNN_STATUS_NOT_SUPPORTED;
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnConvolutionForward(h, &alpha, xd, x, wd, w, cd, algo, ws, need, &beta, yd, y);
    const auto refuse = [&](const std::string& why) { refusals += (refusals.empty() ? "" : ", ") + std::to_string(a) + ": " + why; };
    if (st != CUDNN_STATUS_SUCCESS) {
      refuse(cudnnGetErrorString(st));
      continue;
    }
    if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
      refuse(std::string("launch failed: ") + cudaGetErrorString(e));
      cudaGetLastError();
      continue;
    }
    bool failed = false;
    const EventTiming t = time([&] {
      failed = failed || cudnnConvolutionForward(h, &alpha, xd, x, wd, w, cd, algo, ws, need, &beta, yd, y) != CUDNN_STATUS_SUCCESS;
    });
    if (failed) {
      refuse("a timed launch failed");
      continue;
    }
    if (t.median_ms < floor_ms) {
      refuse("implausible " + std::to_string(t.median_ms * 1e3) + " us, under reading its tensors at 5 TB/s (" +
             std::to_string(floor_ms * 1e3) + " us): it ran nothing");
      continue;
    }
    if (res.algo.empty() || t.median_ms < res.t.median_ms) res.algo = "algo " + std::to_string(a), res.t = t;
  }
  return done("no algorithm: " + refusals);
}

}  // namespace yolocu::bench
