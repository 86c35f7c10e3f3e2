// The host instantiation of the fused YOLOv8 / YOLO11 Detect tail (engine/v8_tail_ref.hpp).
#include "engine/v8_tail_ref.hpp"

#include "core/check.hpp"
#include "engine/v8_tail.hpp"

namespace yolocu::engine {

int64_t v8_tail_reference(const V8Head& head, const std::vector<V8TailSource>& sources, int64_t batch, float* out,
                          int tile) {
  YOLOCU_CHECK(sources.size() == head.levels.size(), kInvalidArgument, "v8_tail_reference: ", sources.size(),
               " sources for ", head.levels.size(), " levels");
  if (tile <= 0) tile = v8tail::tile_pixels_for(head.nc);
  YOLOCU_CHECK(tile > 0 && tile <= 32 && (tile & (tile - 1)) == 0, kInvalidArgument, "v8_tail_reference: tile ", tile);
  int64_t writes = 0;
  const int nc = static_cast<int>(head.nc);
  for (size_t l = 0; l < head.levels.size(); ++l) {
    const V8TailSource& s = sources[l];
    const v8tail::Level L = v8tail::level_from(head.levels[l], s.box_pitch, s.cls_pitch);
    const int blocks = static_cast<int>(batch) * v8tail::tiles_per_image(L, tile);
    for (int b = 0; b < blocks; ++b) {  // the kernel's blocks
      const v8tail::Tile t = v8tail::tile_of(L, b, tile);
      for (int q = 0; q < t.count; ++q) {
        float d[4];
        for (int side = 0; side < 4; ++side) {
          float logits[v8tail::kBins];
          for (int i = 0; i < v8tail::kBins; ++i)
            logits[i] = s.box[v8tail::source_index(L, t, L.box_pitch, q, side * v8tail::kBins + i)];
          d[side] = v8tail::dfl_distance(logits);
        }
        const int p = t.p0 + q, x = p % L.nx, y = p / L.nx;
        for (int k = 0; k < 4; ++k) out[v8tail::output_index(L, nc, head.anchors, t, k, q)] = v8tail::decode(k, x, y, d, L.stride);
        for (int c = 0; c < nc; ++c)
          out[v8tail::output_index(L, nc, head.anchors, t, 4 + c, q)] =
              tail::sigmoid(s.cls[v8tail::source_index(L, t, L.cls_pitch, q, L.cls_channel + c)]);
        writes += 4 + nc;
      }
    }
  }
  return writes;
}

}  // namespace yolocu::engine
