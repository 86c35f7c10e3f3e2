// The fused Detect tail (engine::DetectHead): every merged row [a, y, x] of a level gathers the `no`
// channels a*no .. a*no+no-1 of pixel (y, x) from the head convolution's sigmoid output (nChw{B}c,
// padded, or NCHW) and applies the graph's xy / wh arithmetic in the graph's order.
#include <algorithm>

#include "engine/cpu/cpu_layout.hpp"
#include "engine/cpu/steps/cpu_step.hpp"
#include "engine/detect_tail.hpp"

namespace yolocu::engine::cpu {
namespace {

class DetectHeadStep : public CpuStep {
 public:
  DetectHeadStep(const CpuStepSpec& spec, const CpuStepBuild& b)
      : head_(b.sp.heads[static_cast<size_t>(spec.head)]), n_(b.value(spec.out[0]).shape[0]), dst_(b.fptr(spec.out[0])) {
    for (int id : spec.in) {
      level_src_.push_back(b.fptr(id));
      level_blocked_.push_back(b.blocked(id));
    }
  }

  void run(dnnl::stream&) override {
    for (size_t l = 0; l < head_.levels.size(); ++l) level(l);
  }
  const char* profile_name() const override { return "DetectHead"; }

 private:
  void level(size_t l) const {
    const DetectLevel& L = head_.levels[l];
    const float* src = level_src_[l];
    const bool blocked = level_blocked_[l] != 0;
    const int64_t B = block_size();
    const int64_t C = L.na * L.no, HW = L.ny * L.nx, CB = (C + B - 1) / B;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t y = 0; y < L.ny; ++y) {
        for (int64_t x = 0; x < L.nx; ++x) {
          const int64_t p = y * L.nx + x;
          for (int64_t a = 0; a < L.na; ++a) {
            float* row = dst_ + (n * head_.rows + L.row_begin + a * HW + p) * L.no;
            if (blocked) {  // channel c = cb * B + j: runs of consecutive channels, one a block
              const int64_t c0 = a * L.no;
              const float* blk = src + ((n * CB + c0 / B) * HW + p) * B;
              for (int64_t k = 0, j = c0 % B; k < L.no; k += B - j, j = 0, blk += HW * B) {
                const int64_t len = std::min(B - j, L.no - k);
                for (int64_t t = 0; t < len; ++t) row[k + t] = blk[j + t];
              }
            } else {
              const float* base = src + (n * L.na + a) * L.no * HW + p;
              for (int64_t k = 0; k < L.no; ++k) row[k] = base[k * HW];
            }
            const size_t ci = static_cast<size_t>((a * HW + p) * 2);
            for (size_t q = 0; q < 2; ++q) {
              row[q] = tail::decode_xy(row[q], L.xy_scale[ci + q], L.grid[ci + q], L.stride[ci + q]);
              row[2 + q] = tail::decode_wh(row[2 + q], L.wh_scale[ci + q], L.wh_pow, L.anchor_grid[ci + q]);
            }
          }
        }
      }
  }

  const DetectHead& head_;
  int64_t n_;
  float* dst_;
  std::vector<const float*> level_src_;  // per level: the convolution's (sigmoid) output
  std::vector<char> level_blocked_;      // ... and whether it is blocked
};

}  // namespace

std::unique_ptr<CpuStep> make_detect_head_step(const CpuStepSpec& spec, const CpuStepBuild& b) {
  return std::make_unique<DetectHeadStep>(spec, b);
}

}  // namespace yolocu::engine::cpu
