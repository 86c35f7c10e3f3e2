// CUDA fused CIoU: one forward and one backward launch for all levels.
#include <cstdint>

#include "training/ciou_math.hpp"
#include "training/cuda_check.hpp"
#include "yolocu/training/ciou.hpp"

namespace yolocu::training {
namespace {

constexpr int kBlock = 128;

// All levels' pointers, passed by value as a kernel argument; start[l] is the first global pair
// index of level l (start[num_levels] = total).
template <typename T>
struct CiouArgs {
  const T* pbox[kCiouMaxLevels];
  const T* tbox[kCiouMaxLevels];
  const T* grad[kCiouMaxLevels];
  T* out[kCiouMaxLevels];
  int64_t start[kCiouMaxLevels + 1];
  int num_levels;
};

// One thread per box pair over the concatenation of all levels: the thread finds its level with a
// short linear scan of start[], then reads 4+4 values (two 16/32-byte loads when aligned) and
// writes one ciou (forward) or 4 gradient values (backward).
template <typename T>
__device__ __forceinline__ int find_level(const CiouArgs<T>& a, int64_t i) {
  int l = 0;
  while (l + 1 < a.num_levels && i >= a.start[l + 1]) ++l;
  return l;
}

template <typename T>
__global__ void ciou_forward_kernel(CiouArgs<T> a, double eps) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i >= a.start[a.num_levels]) return;
  const int l = find_level(a, i);
  const int64_t j = i - a.start[l];
  T p[4], t[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    p[k] = a.pbox[l][4 * j + k];
    t[k] = a.tbox[l][4 * j + k];
  }
  a.out[l][j] = detail::ciou_terms<T>(p, t, eps).ciou;
}

template <typename T>
__global__ void ciou_backward_kernel(CiouArgs<T> a, double eps) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kBlock + threadIdx.x;
  if (i >= a.start[a.num_levels]) return;
  const int l = find_level(a, i);
  const int64_t j = i - a.start[l];
  T p[4], t[4], g[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    p[k] = a.pbox[l][4 * j + k];
    t[k] = a.tbox[l][4 * j + k];
  }
  detail::ciou_grad<T>(p, t, eps, a.grad[l][j], g);
#pragma unroll
  for (int k = 0; k < 4; ++k) a.out[l][4 * j + k] = g[k];
}

template <typename T>
void launch(bool forward, const CiouLevel* levels, int num_levels, const void* const* grad, void* const* out,
            double eps, cudaStream_t stream) {
  YOLOCU_CHECK(num_levels >= 0 && num_levels <= kCiouMaxLevels, kInvalidArgument, "ciou: num_levels ",
               num_levels, " outside [0, ", kCiouMaxLevels, "]");
  CiouArgs<T> a{};
  a.num_levels = num_levels;
  a.start[0] = 0;
  for (int l = 0; l < num_levels; ++l) {
    YOLOCU_CHECK(levels[l].n >= 0, kInvalidArgument, "ciou: level ", l, " has n = ", levels[l].n);
    YOLOCU_CHECK(levels[l].n == 0 || (levels[l].pbox && levels[l].tbox && out[l] && (forward || grad[l])),
                 kInvalidArgument, "ciou: level ", l, " has a null pointer");
    a.pbox[l] = static_cast<const T*>(levels[l].pbox);
    a.tbox[l] = static_cast<const T*>(levels[l].tbox);
    a.grad[l] = forward ? nullptr : static_cast<const T*>(grad[l]);
    a.out[l] = static_cast<T*>(out[l]);
    a.start[l + 1] = a.start[l] + levels[l].n;
  }
  const int64_t total = a.start[num_levels];
  if (total == 0) return;
  const unsigned grid = static_cast<unsigned>((total + kBlock - 1) / kBlock);
  if (forward)
    ciou_forward_kernel<T><<<grid, kBlock, 0, stream>>>(a, eps);
  else
    ciou_backward_kernel<T><<<grid, kBlock, 0, stream>>>(a, eps);
  YOLOCU_TRAIN_CHECK_LAUNCH();
}

void dispatch(bool forward, FloatType type, const CiouLevel* levels, int num_levels, const void* const* grad,
              void* const* out, double eps, cudaStream_t stream) {
  if (type == FloatType::kFloat32) return launch<float>(forward, levels, num_levels, grad, out, eps, stream);
  if (type == FloatType::kFloat64) return launch<double>(forward, levels, num_levels, grad, out, eps, stream);
  ::yolocu::detail::fail(ErrorCode::kUnsupported, "ciou: only float32 and float64 are supported, got ",
               float_type_name(type));
}

}  // namespace

void ciou_forward_cuda(FloatType type, const CiouLevel* levels, int num_levels, void* const* d_ciou, double eps,
                       cudaStream_t stream) {
  dispatch(true, type, levels, num_levels, nullptr, d_ciou, eps, stream);
}

void ciou_backward_cuda(FloatType type, const CiouLevel* levels, int num_levels, const void* const* d_grad_ciou,
                        void* const* d_grad_pbox, double eps, cudaStream_t stream) {
  dispatch(false, type, levels, num_levels, d_grad_ciou, d_grad_pbox, eps, stream);
}

}  // namespace yolocu::training
