// The host instantiation of the fused C2PSA attention (engine/attention_ref.hpp): the kernel's
// blocks one after the other, each staging its shared memory (NaN-filled first, so a read of
// anything not staged shows) and running the kernel's per-lane functions for every lane of every
// warp, with the warp reductions in the shuffles' butterfly order.
#include "engine/attention_ref.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.hpp"

namespace yolocu::engine {
namespace {

// __shfl_xor_sync butterfly: every lane ends with the same value; `op` is commutative, so lane l's
// op(v[l], v[l ^ off]) equals its partner's.
template <class Op>
float butterfly(float* v, Op op) {
  for (int off = attn::kLanes / 2; off > 0; off >>= 1) {
    float t[attn::kLanes];
    for (int l = 0; l < attn::kLanes; ++l) t[l] = op(v[l], v[l ^ off]);
    std::copy(t, t + attn::kLanes, v);
  }
  return v[0];
}

}  // namespace

int64_t attention_reference(const attn::Geometry& g, const float* qkv, int64_t batch, float* x, float* v_image) {
  YOLOCU_CHECK(g.heads > 0 && g.key_dim > 0 && g.head_dim > 0 && g.tokens > 0 &&
                   g.qkv_pitch >= g.heads * (2 * g.key_dim + g.head_dim) && g.out_pitch >= g.heads * g.head_dim &&
                   (v_image == nullptr || g.v_pitch >= g.heads * g.head_dim),
               kInvalidArgument, "attention_reference: inconsistent geometry");
  const int kd = g.key_dim, hd = g.head_dim, n = g.tokens, kp = attn::key_pitch(kd, 4);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> keys, values, rows, q;
  int64_t writes = 0;
  for (int b = 0; b < static_cast<int>(batch); ++b)
    for (int h = 0; h < g.heads; ++h)
      for (int qb = 0; qb < attn::query_blocks(n); ++qb) {
        keys.assign(static_cast<size_t>(n) * kp, nan);
        values.assign(static_cast<size_t>(n) * hd, nan);
        rows.assign(static_cast<size_t>(attn::kWarps) * n, nan);
        q.assign(static_cast<size_t>(attn::kWarps) * kd, nan);
        const int q0 = qb * attn::kQueries, q1 = std::min(q0 + attn::kQueries, n);
        for (int j = 0; j < n; ++j)
          for (int c = 0; c < kd + hd; ++c) {
            const float e = qkv[attn::qkv_index(g, b, h, j, kd + c)];
            if (c < kd) {
              keys[static_cast<size_t>(j) * kp + c] = e;
            } else {
              values[static_cast<size_t>(j) * hd + c - kd] = e;
              if (v_image != nullptr && j >= q0 && j < q1) v_image[attn::image_index(g, g.v_pitch, b, h, j, c - kd)] = e;
            }
          }
        for (int warp = 0; warp < attn::kWarps; ++warp) {
          float* row = rows.data() + static_cast<size_t>(warp) * n;
          float* qw = q.data() + static_cast<size_t>(warp) * kd;
          for (int i = q0 + warp; i < q1; i += attn::kWarps) {
            for (int d = 0; d < kd; ++d) qw[d] = qkv[attn::qkv_index(g, b, h, i, d)] * g.scale;
            float lane[attn::kLanes];
            for (int l = 0; l < attn::kLanes; ++l) lane[l] = attn::lane_scores(qw, keys.data(), kp, kd, n, l, row);
            const float m = butterfly(lane, [](float a, float c) { return std::fmax(a, c); });
            for (int l = 0; l < attn::kLanes; ++l) lane[l] = attn::lane_exps(row, n, l, m);
            const float sum = butterfly(lane, [](float a, float c) { return a + c; });
            for (int l = 0; l < attn::kLanes; ++l) attn::lane_normalize(row, n, l, sum);
            for (int d0 = 0; d0 < hd; d0 += attn::kLanes * attn::kDimsPerPass)
              for (int l = 0; l < attn::kLanes; ++l) {
                float acc[attn::kDimsPerPass];
                attn::lane_outputs(row, values.data(), hd, n, d0, l, acc);
                for (int k = 0; k < attn::kDimsPerPass; ++k) {
                  const int d = d0 + l + k * attn::kLanes;
                  if (d < hd) {
                    x[attn::image_index(g, g.out_pitch, b, h, i, d)] = acc[k];
                    ++writes;
                  }
                }
              }
          }
        }
      }
  return writes;
}

}  // namespace yolocu::engine
