// The host instantiation of the fused YOLOv8 / YOLO11 Detect tail (engine/v8_tail_ref.hpp): the
// kernel's blocks one after the other, each running the kernel's phases (engine/v8_tail.hpp) for
// all its threads, phase by phase, on a NaN-filled copy of its shared memory.
#include "engine/v8_tail_ref.hpp"

#include <limits>

#include "core/check.hpp"
#include "engine/v8_tail.hpp"

namespace yolocu::engine {

namespace {
constexpr int kThreads = 256;  // the kernel's block
}  // namespace

int64_t v8_tail_reference(const V8Head& head, const std::vector<V8TailSource>& sources, int64_t batch, float* out,
                          int tile) {
  YOLOCU_CHECK(sources.size() == head.levels.size(), kInvalidArgument, "v8_tail_reference: ", sources.size(),
               " sources for ", head.levels.size(), " levels");
  if (tile <= 0) tile = v8tail::tile_pixels_for(head.nc);
  YOLOCU_CHECK(tile > 0 && tile <= 32 && (tile & (tile - 1)) == 0, kInvalidArgument, "v8_tail_reference: tile ", tile);
  const int shift = v8tail::tile_shift(tile), nc = static_cast<int>(head.nc);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> scores, dist;
  int64_t writes = 0;
  for (size_t l = 0; l < head.levels.size(); ++l) {
    const V8TailSource& s = sources[l];
    const v8tail::Level L = v8tail::level_from(head.levels[l], s.box_pitch, s.cls_pitch);
    const int blocks = static_cast<int>(batch) * v8tail::tiles_per_image(L, tile);
    for (int b = 0; b < blocks; ++b) {
      const v8tail::Tile t = v8tail::tile_of(L, b, tile);
      scores.assign(static_cast<size_t>(v8tail::class_stride(nc) * tile), nan);
      dist.assign(static_cast<size_t>(4 * tile), nan);
      const float* cls = s.cls + v8tail::source_index(L, t, L.cls_pitch, 0, 0);
      for (int tid = 0; tid < kThreads; ++tid)
        v8tail::stage_scores(L, t, nc, tid, kThreads, [&](int i) { return cls[i]; }, scores.data());
      for (int tid = 0; tid < kThreads; ++tid)
        v8tail::stage_distances(
            t, shift, tid, kThreads,
            [&](int q, int side, float* v) {
              for (int i = 0; i < v8tail::kBins; ++i)
                v[i] = s.box[v8tail::source_index(L, t, L.box_pitch, q, side * v8tail::kBins + i)];
            },
            dist.data());
      for (int tid = 0; tid < kThreads; ++tid)
        v8tail::write_outputs(L, t, nc, head.anchors, shift, tid, kThreads, scores.data(), dist.data(),
                              [&](int64_t o, float v) {
                                YOLOCU_CHECK(o >= 0 && o < batch * (4 + head.nc) * head.anchors, kInternal,
                                             "v8_tail_reference: output index ", o, " out of range");
                                out[o] = v;
                                ++writes;
                              });
    }
  }
  return writes;
}

}  // namespace yolocu::engine
