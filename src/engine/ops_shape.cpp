// The CPU engine's shape ops: Shape, Reshape / Flatten / Squeeze / Unsqueeze, Concat, Split, Slice,
// Gather, Transpose, Expand, Where, Range, ConstantOfShape (registered in ops.cpp).
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "engine/ops_internal.hpp"

namespace yolocu::ops::internal {

// ---------------------------------------------------------------- shape ops
void infer_shape(const Node& n, int64_t opset, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 1);
  const int64_t r = static_cast<int64_t>(in[0].shape.size());
  int64_t start = n.attr_int("start", 0), end = n.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  out.resize(1);
  out[0].dtype = DType::kInt64;
  out[0].shape = {std::max<int64_t>(end - start, 0)};
}

void compute_shape(const Node& n, int64_t, const In& in, const Out& out) {
  const int64_t r = static_cast<int64_t>(in[0]->rank());
  int64_t start = n.attr_int("start", 0), end = n.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  for (int64_t i = start; i < end; ++i) out[0]->data_as<int64_t>()[i - start] = in[0]->dim(static_cast<size_t>(i));
}

void infer_reshape(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 2, 2);
  const auto target = to_int_vector(need_const(n, in, 1, "shape"));
  const bool allowzero = n.attr_int("allowzero", 0) != 0;
  Shape s(target.size());
  int64_t infer_at = -1, known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allowzero) {
      YOLOCU_CHECK(i < in[0].shape.size(), kInvalidArgument, n.describe(), ": 0 in shape refers to a missing axis");
      d = in[0].shape[i];
    }
    if (d == -1) {
      YOLOCU_CHECK(infer_at < 0, kInvalidArgument, n.describe(), ": more than one -1 in the target shape");
      infer_at = static_cast<int64_t>(i);
      d = 1;
    }
    YOLOCU_CHECK(d >= 0, kInvalidArgument, n.describe(), ": invalid target dimension ", d);
    YOLOCU_CHECK(d == 0 || known <= std::numeric_limits<int64_t>::max() / d, kInvalidArgument, n.describe(),
                 ": target shape ", shape_str(Shape(target.begin(), target.end())), " overflows int64");
    s[i] = d;
    known *= d;
  }
  const int64_t total = shape_numel(in[0].shape);
  if (infer_at >= 0) {
    YOLOCU_CHECK(known > 0 && total % known == 0, kInvalidArgument, n.describe(), ": cannot reshape ",
                 shape_str(in[0].shape), " to ", shape_str(Shape(target.begin(), target.end())));
    s[static_cast<size_t>(infer_at)] = total / known;
  }
  YOLOCU_CHECK(shape_numel(s) == total, kInvalidArgument, n.describe(), ": cannot reshape ",
               shape_str(in[0].shape), " (", total, " elements) to ", shape_str(s));
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = s;
}

std::vector<int64_t> axes_arg(const Node& n, int64_t opset, const Metas& in, bool required) {
  if (opset >= 13) {
    if (opt(in, 1)) return to_int_vector(need_const(n, in, 1, "axes"));
    YOLOCU_CHECK(!required, kParse, n.describe(), ": missing input 'axes'");
    return {};
  }
  YOLOCU_CHECK(!required || n.has_attr("axes"), kParse, n.describe(), ": missing attribute 'axes'");
  return n.attr_ints("axes");
}

void infer_unsqueeze(const Node& n, int64_t opset, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, opset >= 13 ? 2 : 1);
  auto axes = axes_arg(n, opset, in, true);
  const int64_t r = static_cast<int64_t>(in[0].shape.size() + axes.size());
  std::vector<bool> mark(static_cast<size_t>(r), false);
  for (auto& a : axes) {
    a = norm_axis(n, a, r);
    YOLOCU_CHECK(!mark[static_cast<size_t>(a)], kInvalidArgument, n.describe(), ": repeated axis ", a);
    mark[static_cast<size_t>(a)] = true;
  }
  Shape s;
  size_t k = 0;
  for (int64_t i = 0; i < r; ++i) s.push_back(mark[static_cast<size_t>(i)] ? 1 : in[0].shape[k++]);
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = s;
}

void infer_squeeze(const Node& n, int64_t opset, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, opset >= 13 ? 2 : 1);
  auto axes = axes_arg(n, opset, in, false);
  const int64_t r = static_cast<int64_t>(in[0].shape.size());
  std::vector<bool> drop(static_cast<size_t>(r), false);
  if (axes.empty()) {
    for (int64_t i = 0; i < r; ++i) drop[static_cast<size_t>(i)] = in[0].shape[static_cast<size_t>(i)] == 1;
  } else {
    for (auto a : axes) {
      a = norm_axis(n, a, r);
      YOLOCU_CHECK(in[0].shape[static_cast<size_t>(a)] == 1, kInvalidArgument, n.describe(), ": axis ", a,
                   " has size ", in[0].shape[static_cast<size_t>(a)], ", not 1");
      drop[static_cast<size_t>(a)] = true;
    }
  }
  Shape s;
  for (int64_t i = 0; i < r; ++i)
    if (!drop[static_cast<size_t>(i)]) s.push_back(in[0].shape[static_cast<size_t>(i)]);
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = s;
}

void infer_flatten(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 1);
  const int64_t r = static_cast<int64_t>(in[0].shape.size());
  int64_t axis = n.attr_int("axis", 1);
  if (axis < 0) axis += r;
  YOLOCU_CHECK(axis >= 0 && axis <= r, kInvalidArgument, n.describe(), ": axis out of range");
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < r; ++i) {
    int64_t& side = i < axis ? a : b;
    side = checked_mul(n, side, in[0].shape[static_cast<size_t>(i)], "the flattened size");
  }
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = {a, b};
}

void infer_transpose(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 1);
  const size_t r = in[0].shape.size();
  std::vector<int64_t> perm = n.attr_ints("perm");
  if (perm.empty())
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  YOLOCU_CHECK(perm.size() == r, kInvalidArgument, n.describe(), ": perm has ", perm.size(), " axes, input rank ", r);
  std::vector<bool> used(r, false);
  Shape s;
  for (auto p : perm) {
    YOLOCU_CHECK(p >= 0 && p < static_cast<int64_t>(r) && !used[static_cast<size_t>(p)], kInvalidArgument,
                 n.describe(), ": invalid perm");
    used[static_cast<size_t>(p)] = true;
    s.push_back(in[0].shape[static_cast<size_t>(p)]);
  }
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = s;
}

void compute_transpose(const Node& n, int64_t, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  const size_t r = x.rank();
  std::vector<int64_t> perm = n.attr_ints("perm");
  if (perm.empty())
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  const auto xs = strides_of(x.shape());
  std::vector<int64_t> st(r);  // input stride for each output axis
  for (size_t i = 0; i < r; ++i) st[i] = xs[static_cast<size_t>(perm[i])];
  const size_t es = dtype_size(x.dtype());
  const int64_t total = y.numel();
  if (total == 0) return;
  if (r == 0) {  // a scalar: the row loop below assumes rank >= 1 (found by fuzzing)
    std::memcpy(y.data(), x.data(), dtype_size(x.dtype()));
    return;
  }
  const int64_t inner = y.shape().back();
  const int64_t rows = total / inner;
  const int64_t inner_stride = r ? st[r - 1] : 0;
  const auto* px = static_cast<const uint8_t*>(x.data());
  auto* py = static_cast<uint8_t*>(y.data());
  auto row_fn = [&](int64_t row) {
    int64_t rem = row, base = 0;
    for (size_t d = r ? r - 1 : 0; d-- > 0;) {
      base += (rem % y.shape()[d]) * st[d];
      rem /= y.shape()[d];
    }
    uint8_t* dst = py + row * inner * static_cast<int64_t>(es);
    if (es == 4) {
      const float* s = reinterpret_cast<const float*>(px) + base;
      float* dd = reinterpret_cast<float*>(dst);
      for (int64_t j = 0; j < inner; ++j) dd[j] = s[j * inner_stride];
    } else {
      for (int64_t j = 0; j < inner; ++j) std::memcpy(dst + j * static_cast<int64_t>(es), px + (base + j * inner_stride) * static_cast<int64_t>(es), es);
    }
  };
  if (total >= kParallelMin) {
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; ++row) row_fn(row);
  } else {
    for (int64_t row = 0; row < rows; ++row) row_fn(row);
  }
}

// Copies `rows` blocks of `block` bytes with independent strides (Concat, Split, Slice helpers).
// Large copies are cut into 64 KiB pieces spread over the threads (a channel Concat of one image
// is a few MiB in one block).
void copy_blocks(uint8_t* dst, int64_t dst_stride, const uint8_t* src, int64_t src_stride, int64_t rows, int64_t block) {
  constexpr int64_t kPiece = 64 << 10;
  const int64_t pieces = (block + kPiece - 1) / kPiece;
  const int64_t total = rows * pieces;
  if (rows * block >= kParallelMin * 4 && total > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < total; ++t) {
      const int64_t i = t / pieces, off = (t % pieces) * kPiece;
      std::memcpy(dst + i * dst_stride + off, src + i * src_stride + off, static_cast<size_t>(std::min(kPiece, block - off)));
    }
  } else {
    for (int64_t i = 0; i < rows; ++i) std::memcpy(dst + i * dst_stride, src + i * src_stride, static_cast<size_t>(block));
  }
}

void infer_concat(const Node& n, int64_t, const Metas& in, Metas& out) {
  YOLOCU_CHECK(!in.empty(), kParse, n.describe(), ": no inputs");
  YOLOCU_CHECK(n.has_attr("axis"), kParse, n.describe(), ": missing attribute 'axis'");
  YOLOCU_CHECK(in[0].present && !in[0].shape.empty(), kInvalidArgument, n.describe(),
               ": inputs must be tensors of rank >= 1");
  const int64_t r = static_cast<int64_t>(in[0].shape.size());
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  Shape s = in[0].shape;
  s[static_cast<size_t>(axis)] = 0;
  for (const auto& m : in) {
    YOLOCU_CHECK(m.present && m.shape.size() == static_cast<size_t>(r) && m.dtype == in[0].dtype, kInvalidArgument,
                 n.describe(), ": inputs differ in rank or type");
    for (int64_t d = 0; d < r; ++d)
      YOLOCU_CHECK(d == axis || m.shape[static_cast<size_t>(d)] == in[0].shape[static_cast<size_t>(d)], kInvalidArgument,
                   n.describe(), ": input shapes ", shape_str(m.shape), " and ", shape_str(in[0].shape),
                   " differ outside axis ", axis);
    s[static_cast<size_t>(axis)] =
        checked_add(n, s[static_cast<size_t>(axis)], m.shape[static_cast<size_t>(axis)], "the concatenated axis");
  }
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = s;
}

void compute_concat(const Node& n, int64_t, const In& in, const Out& out) {
  Tensor& y = *out[0];
  const int64_t r = static_cast<int64_t>(y.rank());
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= y.shape()[static_cast<size_t>(d)];
  const int64_t es = static_cast<int64_t>(dtype_size(y.dtype()));
  const int64_t ystride = y.numel() / std::max<int64_t>(outer, 1) * es;
  std::vector<int64_t> blocks;
  int64_t max_block = 0;
  for (const Tensor* x : in) {
    blocks.push_back(outer ? x->numel() / outer * es : 0);
    max_block = std::max(max_block, blocks.back());
  }
  if (outer > 1 && max_block <= 1024 && es == 4) {
    // Many small pieces (the Detect head joins 2 + 2 + 81 floats per row): one parallel pass over
    // the rows, plain float copies instead of a memcpy call per piece.
    auto* py = y.data_as<float>();
#pragma omp parallel for schedule(static) if (y.numel() >= kParallelMin)
    for (int64_t row = 0; row < outer; ++row) {
      float* dst = py + row * (ystride / 4);
      for (size_t k = 0; k < in.size(); ++k) {
        const int64_t len = blocks[k] / 4;
        const float* src = in[k]->data_as<float>() + row * len;
        for (int64_t j = 0; j < len; ++j) dst[j] = src[j];
        dst += len;
      }
    }
    return;
  }
  int64_t off = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    copy_blocks(static_cast<uint8_t*>(y.data()) + off, ystride, static_cast<const uint8_t*>(in[k]->data()), blocks[k],
                outer, blocks[k]);
    off += blocks[k];
  }
}

std::vector<int64_t> split_sizes(const Node& n, int64_t opset, const Shape& s, int64_t axis, size_t outputs,
                                 const Tensor* split_input) {
  std::vector<int64_t> sizes;
  if (opset >= 13) {
    if (split_input) sizes = to_int_vector(*split_input);
  } else {
    sizes = n.attr_ints("split");
  }
  const int64_t dim = s[static_cast<size_t>(axis)];
  if (opset >= 18 && n.has_attr("num_outputs"))
    YOLOCU_CHECK(sizes.empty() && n.attr_int("num_outputs", 0) == static_cast<int64_t>(outputs), kInvalidArgument,
                 n.describe(), ": num_outputs ", n.attr_int("num_outputs", 0), " with ", outputs,
                 " outputs (and no split sizes) expected");
  if (sizes.empty()) {
    YOLOCU_CHECK(outputs > 0, kParse, n.describe(), ": no outputs");
    const int64_t k = static_cast<int64_t>(outputs);
    const int64_t chunk = (dim + k - 1) / k;
    for (int64_t i = 0; i < k; ++i) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - i * chunk)));
  }
  YOLOCU_CHECK(sizes.size() == outputs, kInvalidArgument, n.describe(), ": split has ", sizes.size(), " parts for ",
               outputs, " outputs");
  int64_t sum = 0;  // each part in [0, dim]: the sum cannot overflow (found by fuzzing: sizes near 2^63)
  for (int64_t part : sizes) {
    YOLOCU_CHECK(part >= 0 && part <= dim, kInvalidArgument, n.describe(), ": split size ", part, " for an axis of ", dim);
    sum += part;
  }
  YOLOCU_CHECK(sum == dim, kInvalidArgument, n.describe(), ": split sizes do not add up to ", dim);
  return sizes;
}

void infer_split(const Node& n, int64_t opset, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 2);
  const int64_t r = static_cast<int64_t>(in[0].shape.size());
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  const Tensor* sp = opt(in, 1) ? &need_const(n, in, 1, "split") : nullptr;
  const auto sizes = split_sizes(n, opset, in[0].shape, axis, n.outputs.size(), sp);
  out.resize(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    out[i].dtype = in[0].dtype;
    out[i].shape = in[0].shape;
    out[i].shape[static_cast<size_t>(axis)] = sizes[i];
  }
}

void compute_split(const Node& n, int64_t opset, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  const int64_t r = static_cast<int64_t>(x.rank());
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  // the sizes, not the outputs, place each part: an unused (null) output still takes its share
  const auto sizes = split_sizes(n, opset, x.shape(), axis, out.size(), opt(in, 1));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= x.shape()[static_cast<size_t>(d)];
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
  const int64_t xstride = x.shape()[static_cast<size_t>(axis)] * inner * es;
  int64_t off = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t block = sizes[i] * inner * es;
    if (out[i])
      copy_blocks(static_cast<uint8_t*>(out[i]->data()), block, static_cast<const uint8_t*>(x.data()) + off, xstride,
                  outer, block);
    off += block;
  }
}

struct SliceSpec {
  std::vector<int64_t> start, step;  // per axis of the input
  Shape out;
};

SliceSpec slice_spec(const Node& n, int64_t opset, const Shape& s, const std::vector<int64_t>& starts,
                     const std::vector<int64_t>& ends, std::vector<int64_t> axes, std::vector<int64_t> steps) {
  const int64_t r = static_cast<int64_t>(s.size());
  YOLOCU_CHECK(starts.size() == ends.size(), kInvalidArgument, n.describe(), ": starts and ends differ in length");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  YOLOCU_CHECK(axes.size() == starts.size() && steps.size() == starts.size(), kInvalidArgument, n.describe(),
               ": axes/steps length mismatch");
  SliceSpec sp;
  sp.start.assign(static_cast<size_t>(r), 0);
  sp.step.assign(static_cast<size_t>(r), 1);
  sp.out = s;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = norm_axis(n, axes[i], r);
    const int64_t dim = s[static_cast<size_t>(a)];
    const int64_t step = steps[i];
    YOLOCU_CHECK(step != 0, kInvalidArgument, n.describe(), ": step 0");
    auto clampv = [&](int64_t v, bool is_end) {
      if (v < 0) v += dim;
      if (step > 0) return std::clamp<int64_t>(v, 0, dim);
      return std::clamp<int64_t>(v, -1, dim - 1);
      (void)is_end;
    };
    int64_t b = starts[i], e = ends[i];
    if (b == std::numeric_limits<int64_t>::max() || b > dim) b = step > 0 ? dim : dim - 1;
    if (e == std::numeric_limits<int64_t>::max() || e > dim) e = dim;
    if (e < -dim) e = step > 0 ? 0 : -1;
    else e = clampv(e, true);
    if (b < -dim) b = 0;
    else b = clampv(b, false);
    // b, e are in [-1, dim]; the step may be anything (INT64_MIN included): count in uint64
    const uint64_t span = step > 0 ? (e > b ? static_cast<uint64_t>(e - b) : 0) : (b > e ? static_cast<uint64_t>(b - e) : 0);
    const uint64_t mag = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
    const int64_t len = span ? static_cast<int64_t>(1 + (span - 1) / mag) : 0;
    sp.start[static_cast<size_t>(a)] = b;
    sp.step[static_cast<size_t>(a)] = step;
    sp.out[static_cast<size_t>(a)] = len;
  }
  return sp;
}

SliceSpec slice_spec_from(const Node& n, int64_t opset, const Shape& s, const std::vector<const Tensor*>& args) {
  if (opset < 10)
    return slice_spec(n, opset, s, n.attr_ints("starts"), n.attr_ints("ends"), n.attr_ints("axes"), {});
  auto get = [&](size_t i) { return i < args.size() && args[i] ? to_int_vector(*args[i]) : std::vector<int64_t>{}; };
  return slice_spec(n, opset, s, get(1), get(2), get(3), get(4));
}

void infer_slice(const Node& n, int64_t opset, const Metas& in, Metas& out) {
  need_inputs(n, in, opset >= 10 ? 3 : 1, opset >= 10 ? 5 : 1);
  std::vector<const Tensor*> args(in.size(), nullptr);
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i].present) args[i] = &need_const(n, in, i, "starts/ends/axes/steps");
  const SliceSpec sp = slice_spec_from(n, opset, in[0].shape, args);
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = sp.out;
}

void compute_slice(const Node& n, int64_t opset, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  const SliceSpec sp = slice_spec_from(n, opset, x.shape(), in);
  const auto xs = strides_of(x.shape());
  const size_t r = x.rank();
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
  const int64_t total = y.numel();
  if (total == 0) return;
  const auto* px = static_cast<const uint8_t*>(x.data());
  auto* py = static_cast<uint8_t*>(y.data());
  for (int64_t o = 0; o < total; ++o) {
    int64_t rem = o, src = 0;
    for (size_t d = r; d-- > 0;) {
      const int64_t c = rem % y.shape()[d];
      rem /= y.shape()[d];
      src += (sp.start[d] + c * sp.step[d]) * xs[d];
    }
    std::memcpy(py + o * es, px + src * es, static_cast<size_t>(es));
  }
}

void infer_gather(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 2, 2);
  const int64_t r = static_cast<int64_t>(in[0].shape.size());
  YOLOCU_CHECK(r >= 1, kInvalidArgument, n.describe(), ": gather from a scalar");
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  YOLOCU_CHECK(in[1].dtype == DType::kInt64 || in[1].dtype == DType::kInt32, kParse, n.describe(), ": indices must be int");
  Shape s(in[0].shape.begin(), in[0].shape.begin() + axis);
  s.insert(s.end(), in[1].shape.begin(), in[1].shape.end());
  s.insert(s.end(), in[0].shape.begin() + axis + 1, in[0].shape.end());
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = s;
}

void compute_gather(const Node& n, int64_t, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  const auto idx = to_int_vector(*in[1]);
  const int64_t r = static_cast<int64_t>(x.rank());
  const int64_t axis = norm_axis(n, n.attr_int("axis", 0), r);
  const int64_t dim = x.shape()[static_cast<size_t>(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < r; ++d) inner *= x.shape()[static_cast<size_t>(d)];
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
  const auto* px = static_cast<const uint8_t*>(x.data());
  auto* py = static_cast<uint8_t*>(out[0]->data());
  const int64_t k = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j) {
      int64_t i = idx[static_cast<size_t>(j)];
      if (i < 0) i += dim;
      YOLOCU_CHECK(i >= 0 && i < dim, kInvalidArgument, n.describe(), ": index ", idx[static_cast<size_t>(j)],
                   " out of range for axis of size ", dim);
      std::memcpy(py + (o * k + j) * inner * es, px + (o * dim + i) * inner * es, static_cast<size_t>(inner * es));
    }
}

void infer_range(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 3, 3);
  const Tensor& s = need_const(n, in, 0, "start");
  const Tensor& l = need_const(n, in, 1, "limit");
  const Tensor& d = need_const(n, in, 2, "delta");
  YOLOCU_CHECK(s.numel() == 1 && l.numel() == 1 && d.numel() == 1, kInvalidArgument, n.describe(), ": scalars expected");
  // One type for all three (ONNX's T): compute_range reads delta as start's type (an int32 delta
  // read as int64 overflowed its buffer: found by the onnx fuzzer).
  YOLOCU_CHECK(l.dtype() == s.dtype() && d.dtype() == s.dtype(), kInvalidArgument, n.describe(),
               ": start, limit and delta must have one type, got ", dtype_name(s.dtype()), ", ", dtype_name(l.dtype()),
               ", ", dtype_name(d.dtype()));
  const Tensor sf = cast_tensor(s, DType::kFloat64), lf = cast_tensor(l, DType::kFloat64), df = cast_tensor(d, DType::kFloat64);
  const double a = sf.data_as<double>()[0], b = lf.data_as<double>()[0], c = df.data_as<double>()[0];
  YOLOCU_CHECK(c != 0, kInvalidArgument, n.describe(), ": delta 0");
  const double count = std::ceil((b - a) / c);  // NaN / inf / beyond int64 from a hostile file: no cast
  YOLOCU_CHECK(std::isfinite(count) && count < 2147483648.0, kInvalidArgument, n.describe(), ": a range from ", a,
               " to ", b, " by ", c, " has ", count, " elements");
  const int64_t cnt = count > 0 ? static_cast<int64_t>(count) : 0;  // (-1e30 cast to int64: UB)
  out.resize(1);
  out[0].dtype = s.dtype();
  out[0].shape = {cnt};
}

void compute_range(const Node& n, int64_t, const In& in, const Out& out) {
  dispatch_numeric(in[0]->dtype(), n, [&](auto tag) {
    using T = decltype(tag);
    const T a = in[0]->data_as<T>()[0], c = in[2]->data_as<T>()[0];
    T* py = out[0]->data_as<T>();
    for (int64_t i = 0; i < out[0]->numel(); ++i) {
      if constexpr (std::is_integral_v<T>)  // two's-complement wrap, never signed-overflow UB
        py[i] = static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(i) * static_cast<uint64_t>(c));
      else
        py[i] = static_cast<T>(a + static_cast<T>(i) * c);
    }
  });
}

void infer_expand(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 2, 2);
  const auto target = to_int_vector(need_const(n, in, 1, "shape"));
  out.resize(1);
  out[0].dtype = in[0].dtype;
  out[0].shape = broadcast_shapes(in[0].shape, Shape(target.begin(), target.end()), n.describe());
}

void compute_expand(const Node& n, int64_t, const In& in, const Out& out) {
  const Tensor& x = *in[0];
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
  const auto* px = static_cast<const uint8_t*>(x.data());
  auto* py = static_cast<uint8_t*>(out[0]->data());
  broadcast_loop<1>(out[0]->shape(), {x.shape()}, [&](int64_t o, const std::array<int64_t, 1>& i) {
    std::memcpy(py + o * es, px + i[0] * es, static_cast<size_t>(es));
  });
}

void infer_where(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 3, 3);
  YOLOCU_CHECK(in[0].dtype == DType::kBool, kParse, n.describe(), ": condition must be bool");
  YOLOCU_CHECK(in[1].dtype == in[2].dtype, kParse, n.describe(), ": X and Y types differ");
  out.resize(1);
  out[0].dtype = in[1].dtype;
  out[0].shape = broadcast_shapes(broadcast_shapes(in[0].shape, in[1].shape, n.describe()), in[2].shape, n.describe());
}

void compute_where(const Node&, int64_t, const In& in, const Out& out) {
  const int64_t es = static_cast<int64_t>(dtype_size(in[1]->dtype()));
  const auto* pc = in[0]->data_as<uint8_t>();
  const auto* px = static_cast<const uint8_t*>(in[1]->data());
  const auto* pyy = static_cast<const uint8_t*>(in[2]->data());
  auto* po = static_cast<uint8_t*>(out[0]->data());
  broadcast_loop<3>(out[0]->shape(), {in[0]->shape(), in[1]->shape(), in[2]->shape()},
                    [&](int64_t o, const std::array<int64_t, 3>& i) {
                      std::memcpy(po + o * es, pc[i[0]] ? px + i[1] * es : pyy + i[2] * es, static_cast<size_t>(es));
                    });
}

void infer_constant_of_shape(const Node& n, int64_t, const Metas& in, Metas& out) {
  need_inputs(n, in, 1, 1);
  const auto s = to_int_vector(need_const(n, in, 0, "input"));
  out.resize(1);
  auto it = n.attributes.find("value");
  out[0].dtype = it != n.attributes.end() ? it->second.t.dtype() : DType::kFloat32;
  out[0].shape = Shape(s.begin(), s.end());
  shape_numel(out[0].shape);
}

void compute_constant_of_shape(const Node& n, int64_t, const In&, const Out& out) {
  auto it = n.attributes.find("value");
  Tensor& y = *out[0];
  if (it == n.attributes.end()) {
    std::memset(y.data(), 0, y.nbytes());
    return;
  }
  const Tensor& v = it->second.t;
  YOLOCU_CHECK(v.numel() == 1, kParse, n.describe(), ": 'value' must hold one element");
  const size_t es = dtype_size(v.dtype());
  for (int64_t i = 0; i < y.numel(); ++i) std::memcpy(static_cast<uint8_t*>(y.data()) + i * static_cast<int64_t>(es), v.data(), es);
}

}  // namespace yolocu::ops::internal
