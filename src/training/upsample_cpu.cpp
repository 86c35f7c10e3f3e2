// CPU reference of the nearest 2x upsample: plain loops over the input-resolution tensor.
#include "yolocu/training/upsample.hpp"

#include "core/check.hpp"
#include "training/float_types.hpp"

namespace yolocu::training {
namespace {

// Views both layouts as rows x width x inner: NCHW -> (N*C*H, W, 1), NHWC -> (N*H, W, C).
struct View {
  int64_t rows, width, inner;
};

View make_view(const Upsample2xShape& s) {
  YOLOCU_CHECK(s.n >= 0 && s.c >= 0 && s.h >= 0 && s.w >= 0, kInvalidArgument,
               "upsample2x: negative dimension in (", s.n, ", ", s.c, ", ", s.h, ", ", s.w, ")");
  if (s.layout == Layout::kNCHW) return {s.n * s.c * s.h, s.w, 1};
  return {s.n * s.h, s.w, s.c};
}

template <typename T>
void forward(const T* x, T* y, const View& v) {
  const int64_t out_row = 2 * v.width * v.inner;
  for (int64_t r = 0; r < v.rows; ++r)
    for (int64_t w = 0; w < v.width; ++w)
      for (int64_t c = 0; c < v.inner; ++c) {
        const T value = x[(r * v.width + w) * v.inner + c];
        T* o = y + 2 * r * out_row + 2 * w * v.inner + c;
        o[0] = value;
        o[v.inner] = value;
        o[out_row] = value;
        o[out_row + v.inner] = value;
      }
}

template <typename T>
void backward(const T* dy, T* dx, const View& v) {
  using A = detail::Acc<T>;
  const int64_t out_row = 2 * v.width * v.inner;
  for (int64_t r = 0; r < v.rows; ++r)
    for (int64_t w = 0; w < v.width; ++w)
      for (int64_t c = 0; c < v.inner; ++c) {
        const T* g = dy + 2 * r * out_row + 2 * w * v.inner + c;
        typename A::type sum = A::load(g[0]);
        sum += A::load(g[v.inner]);
        sum += A::load(g[out_row]);
        sum += A::load(g[out_row + v.inner]);
        dx[(r * v.width + w) * v.inner + c] = A::store(sum);
      }
}


}  // namespace

void upsample2x_forward_cpu(FloatType type, const void* x, void* y, const Upsample2xShape& shape) {
  const View v = make_view(shape);
  switch (type) {
    case FloatType::kFloat32: return forward(static_cast<const float*>(x), static_cast<float*>(y), v);
    case FloatType::kFloat64: return forward(static_cast<const double*>(x), static_cast<double*>(y), v);
    case FloatType::kFloat16:
      return forward(static_cast<const detail::Half16*>(x), static_cast<detail::Half16*>(y), v);
    case FloatType::kBFloat16:
      return forward(static_cast<const detail::BFloat16*>(x), static_cast<detail::BFloat16*>(y), v);
  }
  ::yolocu::detail::fail(ErrorCode::kUnsupported, "upsample2x: unknown float type");
}

void upsample2x_backward_cpu(FloatType type, const void* dy, void* dx, const Upsample2xShape& shape) {
  const View v = make_view(shape);
  switch (type) {
    case FloatType::kFloat32: return backward(static_cast<const float*>(dy), static_cast<float*>(dx), v);
    case FloatType::kFloat64: return backward(static_cast<const double*>(dy), static_cast<double*>(dx), v);
    case FloatType::kFloat16:
      return backward(static_cast<const detail::Half16*>(dy), static_cast<detail::Half16*>(dx), v);
    case FloatType::kBFloat16:
      return backward(static_cast<const detail::BFloat16*>(dy), static_cast<detail::BFloat16*>(dx), v);
  }
  ::yolocu::detail::fail(ErrorCode::kUnsupported, "upsample2x: unknown float type");
}

}  // namespace yolocu::training
