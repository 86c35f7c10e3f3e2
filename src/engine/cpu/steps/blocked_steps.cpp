// Steps that run on oneDNN's blocked layout nChw{B}c directly: MaxPool, nearest Resize and channel
// Split. Each (n, channel block) plane is H x W x B floats; the B lanes of a pixel go together.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/cpu/cpu_layout.hpp"
#include "engine/cpu/steps/cpu_step.hpp"

namespace yolocu::engine::cpu {
namespace {

// The blocked geometry of a step's input and (for MaxPool / Resize) output.
struct BlockedPlanes {
  int64_t n = 0, cb = 0, h = 0, w = 0, oh = 0, ow = 0;
  const float* src = nullptr;
  float* dst = nullptr;

  BlockedPlanes(const CpuStepSpec& spec, const CpuStepBuild& b, bool with_output) {
    const Shape& xs = b.value(spec.in[0]).shape;
    n = xs[0];
    cb = xs[1] / block_size();
    h = xs[2];
    w = xs[3];
    src = b.fptr(spec.in[0]);
    if (!with_output) return;
    const Shape& ys = b.value(spec.out[0]).shape;
    oh = ys[2];
    ow = ys[3];
    dst = b.fptr(spec.out[0]);
  }
};

// out[0..B) = the lane-wise maximum of the `count` pixels at v, v + step, ... (-inf for none): a
// greater value replaces, an equal one does not, a NaN always does (so NaN propagates).
inline void window_max(const float* v, int64_t count, int64_t step, int64_t B, float* out) {
  float m[16];
  for (int64_t l = 0; l < B; ++l) m[l] = -std::numeric_limits<float>::infinity();
  for (int64_t k = 0; k < count; ++k, v += step)
    for (int64_t l = 0; l < B; ++l) m[l] = (v[l] > m[l] || std::isnan(v[l])) ? v[l] : m[l];
  std::memcpy(out, m, static_cast<size_t>(B) * sizeof(float));
}

class MaxPoolBlockedStep : public CpuStep {
 public:
  MaxPoolBlockedStep(const CpuStepSpec& spec, const CpuStepBuild& b)
      : p_(spec, b, true), name_(b.sp.plan.nodes[static_cast<size_t>(spec.node)].node.op_type.c_str()) {
    const Node& node = b.sp.plan.nodes[static_cast<size_t>(spec.node)].node;
    const auto k = node.attr_ints("kernel_shape");
    const auto str = node.attr_ints("strides", {1, 1});
    const auto pads = node.attr_ints("pads", {0, 0, 0, 0});
    kh_ = k[0];
    kw_ = k[1];
    sh_ = str[0];
    sw_ = str[1];
    ph_ = pads[0];
    pw_ = pads[1];
  }

  // Separable: each input row's maxima over the kernel's columns, then those over its rows. The
  // same bits as the window at once: each pass keeps the first of equal values and the last NaN
  // in its order, so the pair does in row-major order (the reference op's).
  void run(dnnl::stream&) override {
    const int64_t B = block_size();
    const int64_t planes = p_.n * p_.cb;
#pragma omp parallel
    {
      std::vector<float> rows(static_cast<size_t>(p_.h * p_.ow * B));  // this thread's column maxima
#pragma omp for schedule(static)
      for (int64_t p = 0; p < planes; ++p) {
        const float* src = p_.src + p * p_.h * p_.w * B;
        float* dst = p_.dst + p * p_.oh * p_.ow * B;
        for (int64_t y = 0; y < p_.h; ++y)
          for (int64_t ox = 0; ox < p_.ow; ++ox) {
            const int64_t x0 = std::max<int64_t>(0, ox * sw_ - pw_), x1 = std::min(p_.w, ox * sw_ - pw_ + kw_);
            window_max(src + (y * p_.w + x0) * B, x1 - x0, B, B, rows.data() + (y * p_.ow + ox) * B);
          }
        for (int64_t oy = 0; oy < p_.oh; ++oy) {
          const int64_t y0 = std::max<int64_t>(0, oy * sh_ - ph_), y1 = std::min(p_.h, oy * sh_ - ph_ + kh_);
          for (int64_t ox = 0; ox < p_.ow; ++ox)
            window_max(rows.data() + (y0 * p_.ow + ox) * B, y1 - y0, p_.ow * B, B, dst + (oy * p_.ow + ox) * B);
        }
      }
    }
  }
  const char* profile_name() const override { return name_; }

 private:
  BlockedPlanes p_;
  const char* name_;
  int64_t kh_ = 0, kw_ = 0, sh_ = 0, sw_ = 0, ph_ = 0, pw_ = 0;
};

// Nearest Resize: copies B-float pixels from precomputed source rows / cols.
class ResizeBlockedStep : public CpuStep {
 public:
  ResizeBlockedStep(const CpuStepSpec& spec, const CpuStepBuild& b)
      : p_(spec, b, true), name_(b.sp.plan.nodes[static_cast<size_t>(spec.node)].node.op_type.c_str()) {
    const auto idx = resize_indices(b.sp.plan, b.sp.plan.nodes[static_cast<size_t>(spec.node)]);
    ry_ = idx[2];
    rx_ = idx[3];
  }

  void run(dnnl::stream&) override {
    const int64_t B = block_size();
    const int64_t planes = p_.n * p_.cb;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t oy = 0; oy < p_.oh; ++oy) {
        const float* srow = p_.src + (p * p_.h + ry_[static_cast<size_t>(oy)]) * p_.w * B;
        float* drow = p_.dst + (p * p_.oh + oy) * p_.ow * B;
        for (int64_t ox = 0; ox < p_.ow; ++ox)
          std::memcpy(drow + ox * B, srow + rx_[static_cast<size_t>(ox)] * B, static_cast<size_t>(B) * sizeof(float));
      }
  }
  const char* profile_name() const override { return name_; }

 private:
  BlockedPlanes p_;
  const char* name_;
  std::vector<int64_t> ry_, rx_;  // nearest source rows / cols
};

// Channel Split with every part a multiple of B: each part of each image is one contiguous run of
// channel blocks.
class SplitBlockedStep : public CpuStep {
 public:
  SplitBlockedStep(const CpuStepSpec& spec, const CpuStepBuild& b)
      : p_(spec, b, false), name_(b.sp.plan.nodes[static_cast<size_t>(spec.node)].node.op_type.c_str()) {
    const int64_t B = block_size();
    int64_t begin = 0;
    for (int id : spec.out) {
      const int64_t blocks = b.value(id).shape[1] / B;
      dst_.push_back(b.fptr(id));
      begin_.push_back(begin);
      blocks_.push_back(blocks);
      begin += blocks;
    }
  }

  void run(dnnl::stream&) override {
    const int64_t B = block_size(), plane = p_.h * p_.w * B;
    const int64_t parts = static_cast<int64_t>(dst_.size());
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < p_.n; ++n)
      for (int64_t k = 0; k < parts; ++k) {
        const size_t kk = static_cast<size_t>(k);
        std::memcpy(dst_[kk] + n * blocks_[kk] * plane, p_.src + (n * p_.cb + begin_[kk]) * plane,
                    static_cast<size_t>(blocks_[kk] * plane) * sizeof(float));
      }
  }
  const char* profile_name() const override { return name_; }

 private:
  BlockedPlanes p_;
  const char* name_;
  std::vector<float*> dst_;                  // per output
  std::vector<int64_t> begin_, blocks_;      // its first channel block in the input, its blocks
};

}  // namespace

std::unique_ptr<CpuStep> make_maxpool_blocked_step(const CpuStepSpec& spec, const CpuStepBuild& b) {
  return std::make_unique<MaxPoolBlockedStep>(spec, b);
}
std::unique_ptr<CpuStep> make_resize_blocked_step(const CpuStepSpec& spec, const CpuStepBuild& b) {
  return std::make_unique<ResizeBlockedStep>(spec, b);
}
std::unique_ptr<CpuStep> make_split_blocked_step(const CpuStepSpec& spec, const CpuStepBuild& b) {
  return std::make_unique<SplitBlockedStep>(spec, b);
}

}  // namespace yolocu::engine::cpu
