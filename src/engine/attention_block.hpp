// The attention of YOLO11's C2PSA blocks (ultralytics' `Attention`, exported to ONNX by the
// ultralytics package), recognised in a Plan so that the GPU engine can run it as one step. From
// the qkv convolution's output [B, heads * (2 * kd + hd), H, W] (N = H * W tokens):
//   Reshape [B, heads, 2 * kd + hd, N] -> Split(axis 2) [kd, kd, hd] -> q, k, v
//   q -> Mul(scale) -> Transpose [0, 1, 3, 2]  (or the Mul after the first MatMul)
//   MatMul(q^T, k) [B, heads, N, N] -> Softmax(last axis) -> Transpose [0, 1, 3, 2]
//   MatMul(v, attn^T) [B, heads, hd, N] -> Reshape [B, heads * hd, H, W]: the output x
//   v -> Reshape [B, heads * hd, H, W]: the input of the positional convolution pe (optional)
// with scale a scalar constant equal to kd^-0.5 (ultralytics' key_dim ** -0.5). Every
// intermediate value is fp32, no graph output, and read only by the pattern (v: by the second
// MatMul and its Reshape). The matcher refuses anything else; then the node-by-node path runs.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/plan.hpp"

namespace yolocu::engine {

struct AttentionBlock {
  int qkv = -1;     // value id of the qkv convolution's output [B, heads * (2 kd + hd), H, W]
  int out = -1;     // value id of x = (v @ attn^T) reshaped to [B, heads * hd, H, W]
  int v_image = -1; // value id of Reshape(v) [B, heads * hd, H, W] (pe's input), -1 if v has no such reader
  int first = -1;   // node index of the first Reshape (where the fused step runs: qkv is ready there)
  int64_t batch = 0, heads = 0, key_dim = 0, head_dim = 0, height = 0, width = 0, tokens = 0;
  float scale = 0;  // the graph's constant, applied to q (q * scale, as the export does)
  std::vector<int> absorbed;  // node indices the fused step replaces, the first Reshape included
};

// Matches the pattern above starting at the Reshape node `reshape_idx` reading the qkv value.
// Returns false (block untouched) on anything else.
bool match_attention(const Plan& plan, int reshape_idx, AttentionBlock* block);

// Every such block of the plan, in node order.
std::vector<AttentionBlock> find_attention_blocks(const Plan& plan);

}  // namespace yolocu::engine
