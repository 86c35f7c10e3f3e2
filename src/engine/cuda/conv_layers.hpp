// The GPU engine's convolution layers: what the tuner chooses tactics for (per layer and batch
// size) and the Conv steps launch; the space-to-depth stem's input layout.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/device_memory.hpp"
#include "engine/cuda/tactics/conv_tactic.hpp"
#include "engine/cuda/value_buffers.hpp"

namespace yolocu::cuda_engine_internal {

// Channels of the space-to-depth stem's input: 4 * 3 = 12, padded to 16 (32-byte pixels).
constexpr int kStemChannels = 16;

struct ConvInfo {
  int step = -1;
  int x = -1, y = -1, residual = -1;
  engine::ConvProblem pb;  // at max_batch; n is set per batch (problem())
  bool s2d = false;        // the space-to-depth stem: x is the engine's stem buffer
  DeviceMem d_w, d_bias;   // KRSC in the activation dtype (padded), float32 bias [pb.k]
  DeviceMem d_bias_act;    // fp16 engines: the bias in fp16 too (the cutlass family's epilogue reads it)
  std::string name;
  engine::ConvProblem problem(int batch) const {
    engine::ConvProblem p = pb;
    p.n = batch;
    return p;
  }
};

// One of the engine's workspaces (Engine::workspaces): scratch memory a convolution tactic uses while it runs.
struct Workspace {
  void* ptr = nullptr;
  size_t bytes = 0;
};

struct BatchExec {
  std::vector<std::shared_ptr<const engine::ConvTactic>> tactics;  // per ConvInfo
  // Tuned sizes: per ConvInfo, TunedLayer::plain (the fastest candidate that compiles nothing, where
  // the winner compiles; "" otherwise). Derived sizes: empty.
  std::vector<std::string> plain;
  bool direct_stem = false;  // the stem (Engine::direct_conv) runs as the direct kernel, from the input
  std::vector<GraphExec> graphs;  // the forward's graphs (CudaEngineOptions::graph_segments), in order
  bool graph_failed = false;
  // Per ConvInfo, which of the engine's workspaces its tactic uses (Engine::plan_workspaces; empty:
  // the first for all); planned once the tactics are known.
  std::vector<int> workspace;
  bool workspaces_planned = false;
  int runs = 0;
};

// The buffers a convolution layer reads and writes: its input (the space-to-depth stem reads
// stem_input), weights, biases, residual, output, and the engine's workspace.
inline engine::ConvBuffers conv_buffers(const ConvInfo& ci, const ValueBuffers& values, void* stem_input,
                                        void* workspace, size_t workspace_bytes) {
  engine::ConvBuffers b;
  b.x = ci.s2d ? stem_input : values.ptr(ci.x);
  b.w = ci.d_w.get();
  b.bias = static_cast<const float*>(ci.d_bias.get());
  b.bias_act = ci.d_bias_act.get();
  b.residual = ci.residual >= 0 ? values.ptr(ci.residual) : nullptr;
  b.y = values.ptr(ci.y);
  b.ws = workspace;
  b.ws_bytes = workspace_bytes;
  return b;
}

// Is `ci` YOLOv5's stem (6x6, stride 2, pads 2, 3 channels) on the network input, alone?
inline bool is_s2d_stem(const ConvInfo& ci, int input_value, int readers, int h, int w) {
  const engine::ConvProblem& p = ci.pb;
  return ci.x == input_value && readers == 1 && p.c == 3 && p.group == 1 && p.r == 6 && p.s == 6 && p.str_h == 2 &&
         p.str_w == 2 && p.pad_h == 2 && p.pad_w == 2 && p.dil_h == 1 && p.dil_w == 1 && h % 2 == 0 && w % 2 == 0 &&
         p.p == h / 2 && p.q == w / 2;
}

}  // namespace yolocu::cuda_engine_internal
