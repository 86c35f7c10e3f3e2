// Kernels of the GPU engine (cuda_kernels.cu; those only one step kind launches in its steps/
// <kind>_kernel.cu; sppf_kernel.cu, softmax_matmul.cu), callable from host C++. Every launcher only enqueues
// on `stream` (capturable in a CUDA graph) and throws yolocu::Error(kCuda) if the launch fails.
// `half` selects the activation dtype of NHWC buffers (true: fp16, false: fp32); plain buffers are
// always float32. Element counts must be < 2^31 (checked).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/detect_tail.hpp"

namespace yolocu::cuda_kernels {

constexpr int kMaxRank = 6;

enum class EltOp : int {
  kSigmoid, kRelu, kExp, kSqrt, kFloor, kCeil, kNeg, kAbs,          // unary
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin,                          // binary
};
// Throws kUnsupported for an op type with no EltOp.
EltOp elt_op(const char* op_type);
bool elt_is_unary(EltOp op);

// NCHW (float32 or fp16 as `in_half`) -> NHWC activation dtype.
void nchw_to_nhwc(const void* src, bool in_half, void* dst, bool out_half, int n, int c, int h, int w,
                  cudaStream_t stream);
// NCHW (float32 or fp16) -> space-to-depth NHWC [n, h/2, w/2, cpad] in the activation dtype:
// channel ch * 4 + dy * 2 + dx holds x[ch, 2u + dy, 2v + dx]; channels 4c..cpad-1 are zero.
// h and w even, 1 <= c <= kS2dMaxChannels, cpad >= 4c. (The input of the space-to-depth stem.)
constexpr int kS2dMaxChannels = 4;
void nchw_to_s2d_nhwc(const void* src, bool in_half, void* dst, bool out_half, int n, int c, int h, int w, int cpad,
                      cudaStream_t stream);
// NHWC activation dtype -> NCHW float32.
void nhwc_to_nchw(const void* src, bool in_half, float* dst, int n, int c, int h, int w, cudaStream_t stream);

// dst[p, c] = act(src[p, c] + bias[c]) (+ residual[p, c]) over pixels x channels; bias may be null,
// residual may be null, act = SiLU if silu else identity. src is packed [pixels, channels]; dst and
// the residual have pixel pitches of dst_pitch and res_pitch elements (>= channels: channel slices
// of wider NHWC buffers). src == dst (dst_pitch == channels): in place.
void bias_act_nhwc_to(const void* src, void* dst, int64_t dst_pitch, const float* bias, const void* residual,
                      int64_t res_pitch, bool half, int64_t pixels, int channels, bool silu, cudaStream_t stream);

// Same-shape elementwise op over n elements of the activation dtype (b null for unary ops).
void eltwise_flat(EltOp op, const void* a, const void* b, void* y, bool half, int64_t n, cudaStream_t stream);

// Copies `rows` rows of `row_bytes` from src (pitch src_pitch) to dst (pitch dst_pitch); all
// byte counts; picks the widest access that divides every size and both pointers.
void copy_rows(const void* src, int64_t src_pitch, void* dst, int64_t dst_pitch, int64_t rows, int64_t row_bytes,
               cudaStream_t stream);

struct PoolParams {
  int n, h, w, c, oh, ow, kh, kw, sh, sw, ph, pw;
};
void maxpool_nhwc(const void* x, void* y, bool half, const PoolParams& p, cudaStream_t stream);
// SPPF in one launch (sppf_kernel.cu): x NHWC [n, h, w, c] with pixel pitch x_pitch (>= c) -> y NHWC
// with pixel pitch y_pitch (>= 4c): channels [0, c) = x, then the chained k x k max pools (stride 1, padding k / 2) of x, of
// that, and of that. The map must fit engine::sppf_channel_group.
void sppf_nhwc(const void* x, void* y, bool half, int n, int h, int w, int c, int x_pitch, int y_pitch, int k,
               cudaStream_t stream);

// Nearest resize: output row oy reads input row src_y[oy], column ox reads src_x[ox] (device tables).
// x_pitch, y_pitch: elements per input / output pixel (>= c; > c when x or y is a channel slice of
// a wider buffer).
void resize_nearest_nhwc(const void* x, int x_pitch, void* y, bool half, int n, int h, int w, int c, int oh, int ow,
                         int y_pitch, const int* src_y, const int* src_x, cudaStream_t stream);

// Strided views for the plain (float32) generic kernels: out coordinate -> element offsets.
struct StridedParams {
  int rank = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};  // per output axis (0 = broadcast)
  int64_t b_strides[kMaxRank] = {};
  int64_t a_base = 0;
};
// Elements of the output of a StridedParams kernel.
inline int64_t numel_of(const StridedParams& p) {
  int64_t n = 1;
  for (int d = 0; d < p.rank; ++d) n *= p.out_dims[d];
  return n;
}
void unary_plain(EltOp op, const float* x, float* y, int64_t n, cudaStream_t stream);
// y[i] = op(a[offset_a(i)], b[offset_b(i)])
void binary_plain(EltOp op, const float* a, const float* b, float* y, const StridedParams& p, cudaStream_t stream);
// y[i] = x[a_base + offset_a(i)]  (Transpose, Slice, Split)
void gather_plain(const float* x, float* y, const StridedParams& p, cudaStream_t stream);

// Softmax over `len` values spaced `inner` apart, for each of outer x inner lanes (x and y
// [outer, len, inner] float32): max subtracted first, the sum accumulated in double (as the CPU
// engine). (softmax_matmul.cu)
void softmax_plain(const float* x, float* y, int64_t outer, int64_t len, int64_t inner, cudaStream_t stream);

// y[b] = a[b] x b[b] over the broadcast batch axes: a [.., m, k], b [.., k, n], y [batch.., m, n]
// row-major float32; each operand's batch strides counted in matrices (0: broadcast). fp32
// accumulation over k in order (like the CPU engine's loop).
struct MatMulParams {
  int m = 0, n = 0, k = 0;
  int batch_rank = 0;
  int64_t batch_dims[kMaxRank] = {};
  int64_t a_batch_stride[kMaxRank] = {};
  int64_t b_batch_stride[kMaxRank] = {};
};
void matmul_plain(const float* a, const float* b, float* y, const MatMulParams& p, cudaStream_t stream);

// Fused Detect tail (engine/detect_tail.hpp), every level in one launch: reads each level's head
// convolution output (NHWC, bias added, activation dtype) of `batch` images and writes its rows of
// the merged float32 output [batch, rows, no]. level[l].tables are device pointers; block_begin is
// filled by the launcher.
constexpr int kMaxTailLevels = 4;
struct TailLevels {
  int count = 0;
  const void* src[kMaxTailLevels] = {};
  engine::tail::Level level[kMaxTailLevels];
  int block_begin[kMaxTailLevels + 1] = {};
};
void detect_tail(const TailLevels& levels, bool half, float* out, int64_t rows, int batch, cudaStream_t stream);

// Tuning helpers (the tactic checks): x[i] = uniform in [lo, hi) from a counter hash of (seed, i).
void fill_uniform(void* x, bool half, int64_t n, uint32_t seed, float lo, float hi, cudaStream_t stream);
// Accumulates into d_acc[0..3] (zeroed by the caller): sum (a-b)^2, sum b^2 (double), max |a-b|,
// max |b| (float bits as unsigned), and d_acc_nan[0] += count of non-finite a or b.
struct CompareAcc {
  double sq_diff, sq_ref;
  unsigned max_diff_bits, max_ref_bits;
  unsigned long long non_finite;
};
// a holds rows of `width` elements `a_pitch` apart (a channel slice; a_pitch == width: packed), b
// is packed; n elements in all.
void compare_rows(const void* a, int64_t a_pitch, const void* b, int64_t width, bool half, int64_t n,
                  CompareAcc* d_acc, cudaStream_t stream);

}  // namespace yolocu::cuda_kernels
