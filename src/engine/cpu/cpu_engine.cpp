// CPU executor: runs a Plan with oneDNN convolutions and the reference ops of engine/ops.hpp, all
// activations in one liveness-planned arena.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/check.hpp"
#include "engine/detect_tail.hpp"
#include "engine/memory_plan.hpp"
#include "engine/plan.hpp"
#include "yolocu/engine.hpp"

namespace yolocu {
namespace {

// oneDNN reports through dnnl::error and a failed allocation arrives as std::bad_alloc: both become
// yolocu::Error here, the engine's only failure type (found by fuzzing: a dilated convolution
// oneDNN refuses escaped as dnnl::error).
template <typename F>
auto translate_errors(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_out_of_memory)
      detail::fail(ErrorCode::kOutOfMemory, what, ": oneDNN is out of memory (", e.what(), ")");
    detail::fail(ErrorCode::kUnsupported, what, ": oneDNN cannot run this model: ", e.what());
  } catch (const std::bad_alloc&) {
    detail::fail(ErrorCode::kOutOfMemory, what,
                 ": out of host memory (an allocation failed: the machine, a ulimit -v or cgroup limit; "
                 "max_memory bounds what a model may ask for)");
  }
}

// Under an address-space limit (ulimit -v, RLIMIT_AS) Debian's oneDNN 2.6 can crash (SIGSEGV inside
// dnnl_primitive_create: its JIT code buffer's mapping fails) and libgomp aborts when it cannot map
// a thread's stack. Neither reports an error we could catch, so before building the kernels the
// engine checks that the address space they need is there: `bytes` (arena, weights) plus a margin
// for the JIT code and, per OpenMP thread, its stack (8 MiB) and the 64 MiB that glibc's malloc
// reserves for each thread's arena (it counts against the limit). Without a limit this costs nothing.
void check_address_space(uint64_t bytes, const std::string& what) {
  rlimit rl{};
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
  const uint64_t threads = static_cast<uint64_t>(std::max(1, omp_get_max_threads()));
  const uint64_t need = bytes + (uint64_t{32} << 20) + threads * (uint64_t{72} << 20);
  void* p = need < (uint64_t{1} << 46) ? mmap(nullptr, need, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                                       : MAP_FAILED;
  YOLOCU_CHECK(p != MAP_FAILED, kOutOfMemory, what, ": the address-space limit (ulimit -v: ",
               static_cast<uint64_t>(rl.rlim_cur) >> 20, " MiB) leaves less than ", need >> 20,
               " MiB free, what the CPU engine needs (activations, weights, oneDNN JIT code, ", threads,
               " OpenMP threads' stacks and malloc arenas)");
  munmap(p, need);
}

std::string shape_list(const std::vector<Shape>& shapes) {
  std::string s;
  for (const auto& x : shapes) s += (s.empty() ? "" : ", ") + shape_str(x);
  return s;
}

using engine::Plan;
using engine::PlanNode;

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

// Activations of convolution chains stay in oneDNN's blocked layout nChw{B}c (B = 16 with
// AVX-512, 8 otherwise) when the channel count is a multiple of B; elementwise ops, channel
// Concat, MaxPool and nearest Resize run on that layout directly, anything else gets a plain
// (NCHW) copy made by a reorder step.
enum class StepKind { kNode, kConv, kReorder, kMaxPoolBlocked, kResizeBlocked, kSplitBlocked, kEltwise, kDetectHead, kNoop };

struct StepSpec {
  StepKind kind = StepKind::kNode;
  int node = -1;            // index into plan.nodes (not for reorders)
  bool fused_silu = false;
  bool fused_logistic = false;  // a Detect head convolution: its sigmoid runs in the convolution
  int head = -1;                // kDetectHead: index into Prepared::heads
  int residual = -1;            // kConv: value added to the (activated) output, an absorbed Add
  std::vector<int> in;      // per node input: value id actually read (-1 omitted)
  std::vector<int> out;     // per node output
};

struct Step {
  StepKind kind = StepKind::kNode;
  const PlanNode* node = nullptr;
  dnnl::primitive prim;
  std::unordered_map<int, dnnl::memory> args;
  std::vector<Tensor> in_views, out_views;
  std::vector<const Tensor*> in_ptrs;
  std::vector<Tensor*> out_ptrs;
  // blocked MaxPool / Resize
  int64_t n = 0, cb = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 0, kw = 0, sh = 0, sw = 0, ph = 0, pw = 0;
  std::vector<int64_t> ry, rx;  // nearest source rows / cols
  // blocked channel Split: per output its destination and channel blocks (cb = the input's)
  std::vector<float*> split_dst;
  std::vector<int64_t> split_begin, split_blocks;
  const float* src = nullptr;
  float* dst = nullptr;
  // fused Detect head: per level the convolution's (sigmoid) output and whether it is blocked
  const engine::DetectHead* head = nullptr;
  std::vector<const float*> level_src;
  std::vector<char> level_blocked;
};

struct Prepared {
  Plan plan;
  std::vector<engine::DetectHead> heads;
  std::vector<Step> steps;
  std::vector<char> blocked;    // per value
  std::vector<int64_t> offset;  // per value: arena offset, -1 if none (constant / unused)
  std::unique_ptr<uint8_t[], AlignedFree> arena;
  EngineStats stats;
};

// 16 with AVX-512, else 8; YOLOCU_CPU_BLOCK=8 (or 16) overrides it, read once per process (the
// test suite runs the engine tests again with 8: the layout of CPUs without AVX-512).
int block_size() {
  static const int b = [] {
    const char* env = std::getenv("YOLOCU_CPU_BLOCK");
    if (env && (std::strcmp(env, "8") == 0 || std::strcmp(env, "16") == 0)) return std::atoi(env);
    return __builtin_cpu_supports("avx512f") ? 16 : 8;
  }();
  return b;
}

dnnl::memory::dims to_dims(const Shape& s) { return dnnl::memory::dims(s.begin(), s.end()); }

dnnl::memory::format_tag blocked_tag() {
  return block_size() == 16 ? dnnl::memory::format_tag::nChw16c : dnnl::memory::format_tag::nChw8c;
}

dnnl::memory::desc act_md(const Shape& s, bool blocked) {
  return dnnl::memory::desc(to_dims(s), dnnl::memory::data_type::f32,
                            blocked ? blocked_tag() : dnnl::memory::format_tag::nchw);
}

// MaxPool on nChw{B}c: each (n, channel block) plane is H x W x B floats; B lanes in parallel.
void maxpool_blocked(const Step& st) {
  const int64_t B = block_size();
  const int64_t planes = st.n * st.cb;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p) {
    const float* src = st.src + p * st.h * st.w * B;
    float* dst = st.dst + p * st.oh * st.ow * B;
    for (int64_t oy = 0; oy < st.oh; ++oy)
      for (int64_t ox = 0; ox < st.ow; ++ox) {
        float m[16];
        for (int64_t l = 0; l < B; ++l) m[l] = -std::numeric_limits<float>::infinity();
        const int64_t y0 = std::max<int64_t>(0, oy * st.sh - st.ph), y1 = std::min(st.h, oy * st.sh - st.ph + st.kh);
        const int64_t x0 = std::max<int64_t>(0, ox * st.sw - st.pw), x1 = std::min(st.w, ox * st.sw - st.pw + st.kw);
        for (int64_t y = y0; y < y1; ++y)
          for (int64_t x = x0; x < x1; ++x) {
            const float* v = src + (y * st.w + x) * B;
            for (int64_t l = 0; l < B; ++l) m[l] = (v[l] > m[l] || std::isnan(v[l])) ? v[l] : m[l];
          }
        std::memcpy(dst + (oy * st.ow + ox) * B, m, static_cast<size_t>(B) * sizeof(float));
      }
  }
}

// Nearest Resize on nChw{B}c: copies B-float pixels from precomputed source rows/cols.
void resize_blocked(const Step& st) {
  const int64_t B = block_size();
  const int64_t planes = st.n * st.cb;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < st.oh; ++oy) {
      const float* srow = st.src + (p * st.h + st.ry[static_cast<size_t>(oy)]) * st.w * B;
      float* drow = st.dst + (p * st.oh + oy) * st.ow * B;
      for (int64_t ox = 0; ox < st.ow; ++ox)
        std::memcpy(drow + ox * B, srow + st.rx[static_cast<size_t>(ox)] * B, static_cast<size_t>(B) * sizeof(float));
    }
}

// Channel Split on nChw{B}c with every part a multiple of B: each part of each image is one
// contiguous run of channel blocks.
void split_blocked(const Step& st) {
  const int64_t B = block_size(), plane = st.h * st.w * B;
  const int64_t parts = static_cast<int64_t>(st.split_dst.size());
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < st.n; ++n)
    for (int64_t k = 0; k < parts; ++k) {
      const size_t kk = static_cast<size_t>(k);
      std::memcpy(st.split_dst[kk] + n * st.split_blocks[kk] * plane, st.src + (n * st.cb + st.split_begin[kk]) * plane,
                  static_cast<size_t>(st.split_blocks[kk] * plane) * sizeof(float));
    }
}

// The fused Detect tail (engine::DetectHead): every merged row [a, y, x] of a level gathers the
// `no` channels a*no .. a*no+no-1 of pixel (y, x) from the head convolution's sigmoid output
// (nChw{B}c, padded, or NCHW) and applies the graph's xy / wh arithmetic in the graph's order.
void detect_head(const Step& st) {
  const engine::DetectHead& h = *st.head;
  const int64_t B = block_size();
  for (size_t l = 0; l < h.levels.size(); ++l) {
    const engine::DetectLevel& L = h.levels[l];
    const float* src = st.level_src[l];
    const bool blocked = st.level_blocked[l] != 0;
    const int64_t C = L.na * L.no, HW = L.ny * L.nx, CB = (C + B - 1) / B;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < st.n; ++n)
      for (int64_t y = 0; y < L.ny; ++y) {
        for (int64_t x = 0; x < L.nx; ++x) {
          const int64_t p = y * L.nx + x;
          for (int64_t a = 0; a < L.na; ++a) {
            float* row = st.dst + (n * h.rows + L.row_begin + a * HW + p) * L.no;
            if (blocked) {  // channel c = cb * B + j; no division in the loop
              const int64_t c0 = a * L.no;
              const float* blk = src + ((n * CB + c0 / B) * HW + p) * B;
              int64_t j = c0 % B;
              for (int64_t k = 0; k < L.no; ++k) {
                row[k] = blk[j];
                if (++j == B) {
                  j = 0;
                  blk += HW * B;
                }
              }
            } else {
              const float* base = src + (n * L.na + a) * L.no * HW + p;
              for (int64_t k = 0; k < L.no; ++k) row[k] = base[k * HW];
            }
            const size_t ci = static_cast<size_t>((a * HW + p) * 2);
            for (size_t q = 0; q < 2; ++q) {
              row[q] = engine::tail::decode_xy(row[q], L.xy_scale[ci + q], L.grid[ci + q], L.stride[ci + q]);
              row[2 + q] = engine::tail::decode_wh(row[2 + q], L.wh_scale[ci + q], L.wh_pow, L.anchor_grid[ci + q]);
            }
          }
        }
      }
  }
}

}  // namespace

struct CpuEngine::Impl {
  std::shared_ptr<const Model> model;
  CpuEngineOptions options;
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::mutex mutex;
  std::map<std::vector<Shape>, std::unique_ptr<Prepared>> cache;
  Prepared* last = nullptr;

  Prepared& prepare(const std::vector<Shape>& shapes);
  std::unique_ptr<Prepared> build(const std::vector<Shape>& shapes);
  void make_conv(Prepared& p, Step& step, const StepSpec& spec);
};

std::unique_ptr<Prepared> CpuEngine::Impl::build(const std::vector<Shape>& shapes) {
  const auto t0 = std::chrono::steady_clock::now();
  auto p = std::make_unique<Prepared>();
  engine::PlanOptions plan_options;
  plan_options.max_memory = options.max_memory;
  p->plan = engine::build_plan(*model, shapes, plan_options);
  Plan& plan = p->plan;

  // 1. Steps, with Conv -> Sigmoid -> Mul fused into one convolution and the Detect head's tail
  // (reshape, transpose, sigmoid, split, grid/anchor arithmetic, concats) into one step.
  std::vector<StepSpec> specs;
  std::vector<bool> absorbed(plan.nodes.size(), false);
  std::vector<int> head_at(plan.nodes.size(), -1);      // the Concat a fused head replaces
  std::vector<bool> logistic(plan.nodes.size(), false);  // head convolutions
  if (options.fuse_detect_head) p->heads = engine::find_detect_heads(plan);
  for (size_t k = 0; k < p->heads.size(); ++k) {
    const engine::DetectHead& h = p->heads[k];
    for (int n : h.absorbed) absorbed[static_cast<size_t>(n)] = true;
    for (const auto& L : h.levels) logistic[static_cast<size_t>(L.conv)] = true;
    absorbed[static_cast<size_t>(h.concat)] = false;
    head_at[static_cast<size_t>(h.concat)] = static_cast<int>(k);
    p->stats.fused_nodes += static_cast<int>(h.absorbed.size()) - 1;
  }
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    if (absorbed[i]) continue;
    const PlanNode& pn = plan.nodes[i];
    StepSpec s;
    s.node = static_cast<int>(i);
    s.in = pn.in;
    s.out = pn.out;
    if (head_at[i] >= 0) {
      const engine::DetectHead& h = p->heads[static_cast<size_t>(head_at[i])];
      s.kind = StepKind::kDetectHead;
      s.head = head_at[i];
      s.in.clear();
      for (const auto& L : h.levels) s.in.push_back(plan.nodes[static_cast<size_t>(L.conv)].out[0]);
    } else if (pn.node.op_type == "Conv" && plan.values[static_cast<size_t>(pn.in[0])].dtype == DType::kFloat32) {
      YOLOCU_CHECK(plan.values[static_cast<size_t>(pn.in[1])].constant, kUnsupported, pn.node.describe(),
                   ": weights computed at run time are not supported");
      s.kind = StepKind::kConv;
      s.fused_logistic = logistic[i];
      int sig = -1, mul = -1;
      if (!s.fused_logistic && engine::is_silu_pair(plan, static_cast<int>(i), &sig, &mul)) {
        absorbed[static_cast<size_t>(sig)] = absorbed[static_cast<size_t>(mul)] = true;
        s.fused_silu = true;
        s.out = plan.nodes[static_cast<size_t>(mul)].out;
        p->stats.fused_nodes += 2;
      }
      // Residual: the (activated) output's only consumer is Add(out, x) with x computed before
      // this convolution (the Bottleneck shortcut) -> a binary-add post-op reading x.
      const int add = s.fused_logistic ? -1 : engine::residual_add(plan, static_cast<int>(i), s.out[0], &s.residual);
      if (add >= 0) {
        absorbed[static_cast<size_t>(add)] = true;
        s.out = plan.nodes[static_cast<size_t>(add)].out;
        s.in.push_back(s.residual);
        p->stats.fused_nodes += 1;
      }
    }
    specs.push_back(std::move(s));
  }

  // 2. Layouts: which activations stay blocked; plain twins (via reorder steps) where needed.
  const int64_t B = block_size();
  p->blocked.assign(plan.values.size(), 0);
  auto blockable = [&](int id) {
    const auto& v = plan.values[static_cast<size_t>(id)];
    return !v.constant && v.dtype == DType::kFloat32 && v.shape.size() == 4 && v.shape[1] % B == 0;
  };
  auto is_blocked = [&](int id) { return id >= 0 && p->blocked[static_cast<size_t>(id)]; };
  std::vector<int> twin(plan.values.size(), -1);   // plain copy of a blocked value
  std::vector<int> btwin(plan.values.size(), -1);  // blocked copy of a plain value
  std::vector<StepSpec> ordered;
  auto plain_of = [&](int id) {
    if (!is_blocked(id)) return id;
    if (twin[static_cast<size_t>(id)] < 0) {
      engine::PlanValue pv = plan.values[static_cast<size_t>(id)];
      pv.name += ":nchw";
      pv.graph_output = false;
      pv.consumers.clear();
      plan.values.push_back(pv);
      p->blocked.push_back(0);
      twin.push_back(-1);
      btwin.push_back(-1);
      const int t = static_cast<int>(plan.values.size()) - 1;
      twin[static_cast<size_t>(id)] = t;
      StepSpec r;
      r.kind = StepKind::kReorder;
      r.in = {id};
      r.out = {t};
      ordered.push_back(r);
    }
    return twin[static_cast<size_t>(id)];
  };
  // A convolution reading a plain activation with many channels (after a Split, Reshape,
  // Transpose, MatMul ... computed node by node) would get oneDNN's reference kernel: it reads a
  // blocked copy instead, made by a reorder step.
  auto blocked_of = [&](int id) {
    if (is_blocked(id) || !blockable(id)) return id;
    if (btwin[static_cast<size_t>(id)] < 0) {
      engine::PlanValue pv = plan.values[static_cast<size_t>(id)];
      pv.name += ":blocked";
      pv.graph_input = pv.graph_output = false;
      pv.consumers.clear();
      plan.values.push_back(pv);
      p->blocked.push_back(1);
      twin.push_back(-1);
      btwin.push_back(-1);
      const int t = static_cast<int>(plan.values.size()) - 1;
      btwin[static_cast<size_t>(id)] = t;
      StepSpec r;
      r.kind = StepKind::kReorder;
      r.in = {id};
      r.out = {t};
      ordered.push_back(r);
    }
    return btwin[static_cast<size_t>(id)];
  };
  for (StepSpec& s : specs) {
    const PlanNode& pn = plan.nodes[static_cast<size_t>(s.node)];
    const std::string& op = pn.node.op_type;
    bool out_blocked = false;
    std::vector<int> runtime_in;
    for (int id : s.in)
      if (id >= 0 && !plan.values[static_cast<size_t>(id)].constant) runtime_in.push_back(id);
    const int y = s.out.empty() ? -1 : s.out[0];
    if (s.kind == StepKind::kConv) {
      out_blocked = blockable(y);
      // Channel count not a multiple of B (e.g. the 255-channel heads) after a blocked input: write
      // the padded blocked layout (oneDNN's fast kernels) and reorder to plain for the consumers.
      const auto& yv = plan.values[static_cast<size_t>(y)];
      if (!out_blocked && is_blocked(s.in[0]) && yv.shape.size() == 4 && yv.dtype == DType::kFloat32)
        p->blocked[static_cast<size_t>(y)] = 2;
    } else if (s.kind == StepKind::kDetectHead) {
      // writes plain rows; reads the head convolutions in whichever layout they have
    } else if (op == "Sigmoid" || op == "Mul" || op == "Add" || op == "Sub" || op == "Relu") {
      bool ok = y >= 0 && blockable(y) && runtime_in.size() == s.in.size();
      for (int id : runtime_in) ok = ok && is_blocked(id) && plan.values[static_cast<size_t>(id)].shape == plan.values[static_cast<size_t>(y)].shape;
      out_blocked = ok;
    } else if (op == "Concat") {
      const int64_t r = static_cast<int64_t>(plan.values[static_cast<size_t>(y)].shape.size());
      int64_t axis = pn.node.attr_int("axis", 0);
      if (axis < 0) axis += r;
      bool ok = axis == 1 && blockable(y) && runtime_in.size() == s.in.size();
      for (int id : runtime_in) ok = ok && is_blocked(id);
      out_blocked = ok;
    } else if (op == "MaxPool") {
      out_blocked = is_blocked(s.in[0]) && blockable(y) && pn.node.attr_ints("dilations", {1, 1}) == std::vector<int64_t>{1, 1} &&
                    pn.node.attr_int("ceil_mode", 0) == 0;
      if (out_blocked) s.kind = StepKind::kMaxPoolBlocked;
    } else if (op == "Resize" || op == "Upsample") {
      out_blocked = is_blocked(s.in[0]) && blockable(y) &&
                    plan.values[static_cast<size_t>(y)].shape[1] == plan.values[static_cast<size_t>(s.in[0])].shape[1] &&
                    plan.values[static_cast<size_t>(y)].shape[0] == plan.values[static_cast<size_t>(s.in[0])].shape[0];
      if (out_blocked) s.kind = StepKind::kResizeBlocked;
    } else if (op == "Split") {
      // channel Split of a blocked value into parts that are multiples of B: stays blocked
      const int64_t r = static_cast<int64_t>(plan.values[static_cast<size_t>(s.in[0])].shape.size());
      int64_t axis = pn.node.attr_int("axis", 0);
      if (axis < 0) axis += r;
      bool ok = axis == 1 && is_blocked(s.in[0]) && !s.out.empty();
      for (int id : s.out) ok = ok && id >= 0 && blockable(id) && !plan.values[static_cast<size_t>(id)].graph_output;
      if (ok) {
        s.kind = StepKind::kSplitBlocked;
        for (int id : s.out) p->blocked[static_cast<size_t>(id)] = 1;
        ordered.push_back(s);
        continue;
      }
    }
    // Inputs: convolutions and the Detect head read either layout; blocked ops read blocked; the
    // rest read plain twins.
    for (int& id : s.in) {
      if (id < 0 || plan.values[static_cast<size_t>(id)].constant) continue;
      if (s.kind == StepKind::kConv) {
        // The source of a convolution: blocked (B | C) as it is; a padded blocked value (C not a
        // multiple of B, e.g. YOLO11's 8-channel C3k bottlenecks) has no fast kernel as a source:
        // a plain copy; a plain value with more than 4 channels feeding a blocked output: a blocked
        // copy (after a Split, Reshape, Transpose, MatMul ... run node by node).
        if (&id == &s.in[0]) {
          const auto& xv = plan.values[static_cast<size_t>(id)];
          if (p->blocked[static_cast<size_t>(id)] == 2)
            id = plain_of(id);
          else if (xv.shape.size() == 4 && xv.shape[1] > 4 && blockable(y))
            id = blocked_of(id);
        }
        continue;
      }
      if (s.kind == StepKind::kDetectHead) continue;
      if (!out_blocked) id = plain_of(id);
    }
    if (out_blocked) p->blocked[static_cast<size_t>(y)] = 1;
    ordered.push_back(s);
  }
  for (int& id : plan.outputs)
    if (is_blocked(id)) {
      const int t = plain_of(id);
      plan.values[static_cast<size_t>(t)].graph_output = true;
      id = t;
    }
  specs = std::move(ordered);

  // 3. Buffers: view ops alias their input; the inputs of a blocked channel Concat of one image
  // are written straight into their slice of its output (nChw{B}c with B | C: the slices are
  // consecutive), and the Concat step disappears; lifetimes over step indices.
  const size_t nv = plan.values.size();
  std::vector<int> parent(nv, -1);   // the value whose buffer this one lives in
  std::vector<int64_t> rel(nv, 0);   // byte offset inside it
  for (auto& s : specs) {
    if (s.kind != StepKind::kNode) continue;
    const PlanNode& pn = plan.nodes[static_cast<size_t>(s.node)];
    if (pn.op->is_view && !s.in.empty() && s.in[0] >= 0 && !plan.values[static_cast<size_t>(s.in[0])].constant &&
        s.out.size() == 1 && s.out[0] >= 0) {
      parent[static_cast<size_t>(s.out[0])] = s.in[0];
      continue;
    }
    if (pn.node.op_type != "Concat" || s.out.size() != 1 || p->blocked[static_cast<size_t>(s.out[0])] != 1 ||
        plan.values[static_cast<size_t>(s.out[0])].shape[0] != 1)
      continue;
    bool ok = true;
    for (size_t k = 0; k < s.in.size() && ok; ++k) {
      const int id = s.in[k];
      const auto& v = id >= 0 ? plan.values[static_cast<size_t>(id)] : plan.values[0];
      ok = id >= 0 && !v.constant && !v.graph_input && !v.graph_output && v.producer >= 0 &&
           p->blocked[static_cast<size_t>(id)] == 1 && parent[static_cast<size_t>(id)] < 0 &&
           std::count(s.in.begin(), s.in.end(), id) == 1;
    }
    if (!ok) continue;
    int64_t off = 0;
    for (int id : s.in) {
      parent[static_cast<size_t>(id)] = s.out[0];
      rel[static_cast<size_t>(id)] = off;
      off += shape_numel(plan.values[static_cast<size_t>(id)].shape) * static_cast<int64_t>(sizeof(float));
    }
    s.kind = StepKind::kNoop;
    ++p->stats.fused_nodes;
  }
  std::vector<int> root(nv);
  std::vector<int64_t> root_off(nv, 0);
  for (size_t v = 0; v < nv; ++v) {
    int r = static_cast<int>(v);
    int64_t o = 0;
    while (parent[static_cast<size_t>(r)] >= 0) {
      o += rel[static_cast<size_t>(r)];
      r = parent[static_cast<size_t>(r)];
    }
    root[v] = r;
    root_off[v] = o;
  }
  std::vector<bool> is_const(nv);
  for (size_t v = 0; v < nv; ++v) is_const[v] = plan.values[v].constant;
  std::vector<std::vector<int>> step_values;
  for (const auto& s : specs) {
    step_values.push_back(s.in);
    step_values.back().insert(step_values.back().end(), s.out.begin(), s.out.end());
  }
  auto buffer_bytes = [&](int v) {
    const auto& val = plan.values[static_cast<size_t>(v)];
    return p->blocked[static_cast<size_t>(v)] ? act_md(val.shape, true).get_size()
                                              : static_cast<size_t>(shape_numel(val.shape)) * dtype_size(val.dtype);
  };
  const engine::ValueArena mp =
      engine::plan_value_arena(root, root_off, is_const, step_values, plan.inputs, plan.outputs, buffer_bytes, 64);
  const uint64_t budget = options.max_memory ? options.max_memory : default_max_memory();
  YOLOCU_CHECK(mp.total_bytes <= budget, kOutOfMemory, "the activation memory for input shapes ", shape_list(shapes),
               " needs ", mp.total_bytes, " bytes, above the memory budget of ", budget,
               " bytes (max_memory, yolocu --max-memory)");
  uint64_t weight_bytes = 0;
  for (const auto& v : plan.values)
    if (v.constant) weight_bytes += v.value.nbytes();
  check_address_space(mp.total_bytes + weight_bytes, "CpuEngine: input shapes " + shape_list(shapes));
  p->arena.reset(static_cast<uint8_t*>(std::aligned_alloc(64, std::max<size_t>(mp.total_bytes, 64))));
  YOLOCU_CHECK(p->arena, kOutOfMemory, "cannot allocate ", mp.total_bytes, " bytes of activation memory");
  p->offset = mp.offset;
  p->stats.arena_bytes = mp.total_bytes;
  p->stats.naive_bytes = mp.naive_bytes;

  // 4. Instantiate steps over the arena.
  auto ptr_of = [&](int id) {
    YOLOCU_CHECK(p->offset[static_cast<size_t>(id)] >= 0, kInternal, "value '", plan.values[static_cast<size_t>(id)].name,
                 "' has no buffer");
    return p->arena.get() + p->offset[static_cast<size_t>(id)];
  };
  auto view_of = [&](int id) {
    const auto& val = plan.values[static_cast<size_t>(id)];
    if (val.constant) return val.value;
    return Tensor::view(val.dtype, val.shape, ptr_of(id));
  };
  p->steps.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const StepSpec& s = specs[i];
    Step& st = p->steps[i];
    st.kind = s.kind;
    if (s.kind == StepKind::kNoop) continue;
    if (s.kind == StepKind::kReorder) {
      const auto& v = plan.values[static_cast<size_t>(s.in[0])];
      dnnl::memory src(act_md(v.shape, p->blocked[static_cast<size_t>(s.in[0])] != 0), eng, ptr_of(s.in[0]));
      dnnl::memory dst(act_md(v.shape, p->blocked[static_cast<size_t>(s.out[0])] != 0), eng, ptr_of(s.out[0]));
      st.prim = dnnl::reorder(src, dst);
      st.args = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
      continue;
    }
    st.node = &plan.nodes[static_cast<size_t>(s.node)];
    if (s.kind == StepKind::kConv) {
      make_conv(*p, st, s);
      continue;
    }
    if (s.kind == StepKind::kDetectHead) {
      st.head = &p->heads[static_cast<size_t>(s.head)];
      st.n = plan.values[static_cast<size_t>(s.out[0])].shape[0];
      for (int id : s.in) {
        st.level_src.push_back(reinterpret_cast<const float*>(ptr_of(id)));
        st.level_blocked.push_back(p->blocked[static_cast<size_t>(id)] != 0);
      }
      st.dst = reinterpret_cast<float*>(ptr_of(s.out[0]));
      continue;
    }
    if (s.kind == StepKind::kSplitBlocked) {
      const Shape& xs = plan.values[static_cast<size_t>(s.in[0])].shape;
      st.n = xs[0];
      st.cb = xs[1] / B;
      st.h = xs[2];
      st.w = xs[3];
      st.src = reinterpret_cast<const float*>(ptr_of(s.in[0]));
      int64_t begin = 0;
      for (int id : s.out) {
        const int64_t blocks = plan.values[static_cast<size_t>(id)].shape[1] / B;
        st.split_dst.push_back(reinterpret_cast<float*>(ptr_of(id)));
        st.split_begin.push_back(begin);
        st.split_blocks.push_back(blocks);
        begin += blocks;
      }
      continue;
    }
    if (s.kind == StepKind::kMaxPoolBlocked || s.kind == StepKind::kResizeBlocked) {
      const Shape& xs = plan.values[static_cast<size_t>(s.in[0])].shape;
      const Shape& ys = plan.values[static_cast<size_t>(s.out[0])].shape;
      st.n = xs[0];
      st.cb = xs[1] / B;
      st.h = xs[2];
      st.w = xs[3];
      st.oh = ys[2];
      st.ow = ys[3];
      st.src = reinterpret_cast<const float*>(ptr_of(s.in[0]));
      st.dst = reinterpret_cast<float*>(ptr_of(s.out[0]));
      if (s.kind == StepKind::kMaxPoolBlocked) {
        const auto k = st.node->node.attr_ints("kernel_shape");
        const auto str = st.node->node.attr_ints("strides", {1, 1});
        const auto pads = st.node->node.attr_ints("pads", {0, 0, 0, 0});
        st.kh = k[0];
        st.kw = k[1];
        st.sh = str[0];
        st.sw = str[1];
        st.ph = pads[0];
        st.pw = pads[1];
      } else {
        const auto idx = engine::resize_indices(plan, *st.node);
        st.ry = idx[2];
        st.rx = idx[3];
      }
      continue;
    }
    if (st.node->node.op_type == "Sigmoid" && plan.values[static_cast<size_t>(s.in[0])].dtype == DType::kFloat32 &&
        !plan.values[static_cast<size_t>(s.in[0])].constant) {
      // oneDNN's JIT logistic (vectorised exp): the Detect head applies it to N x 25200 x 85 values.
      // Either layout: elementwise over the buffer (a padded blocked buffer has the same size).
      const size_t bytes = buffer_bytes(s.in[0]);
      const dnnl::memory::desc md({static_cast<dnnl::memory::dim>(bytes / 4)}, dnnl::memory::data_type::f32,
                                  dnnl::memory::format_tag::x);
      const dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_logistic, md, 0.f, 0.f);
      const dnnl::eltwise_forward::primitive_desc pd(d, eng);
      st.kind = StepKind::kEltwise;
      st.prim = dnnl::eltwise_forward(pd);
      st.args = {{DNNL_ARG_SRC, dnnl::memory(md, eng, ptr_of(s.in[0]))}, {DNNL_ARG_DST, dnnl::memory(md, eng, ptr_of(s.out[0]))}};
      continue;
    }
    for (int id : s.in) st.in_views.push_back(id >= 0 ? view_of(id) : Tensor());
    for (int id : s.out) st.out_views.push_back(id >= 0 ? view_of(id) : Tensor());
    for (size_t k = 0; k < st.in_views.size(); ++k) st.in_ptrs.push_back(s.in[k] >= 0 ? &st.in_views[k] : nullptr);
    for (size_t k = 0; k < st.out_views.size(); ++k) st.out_ptrs.push_back(s.out[k] >= 0 ? &st.out_views[k] : nullptr);
  }
  p->stats.runtime_nodes = static_cast<int>(
      std::count_if(p->steps.begin(), p->steps.end(), [](const Step& st) { return st.kind != StepKind::kNoop; }));
  p->stats.folded_nodes = plan.folded_nodes;
  p->stats.prepare_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

void CpuEngine::Impl::make_conv(Prepared& p, Step& st, const StepSpec& spec) {
  using dnnl::memory;
  const PlanNode& pn = *st.node;
  const Node& n = pn.node;
  const Plan& plan = p.plan;
  const auto& x = plan.values[static_cast<size_t>(pn.in[0])];
  const auto& w = plan.values[static_cast<size_t>(pn.in[1])];
  const bool has_bias = pn.in.size() > 2 && pn.in[2] >= 0;
  const int yid = spec.out[0];
  const auto& y = plan.values[static_cast<size_t>(yid)];
  const int64_t group = n.attr_int("group", 1);
  const auto s = n.attr_ints("strides", {1, 1});
  const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
  const auto d = n.attr_ints("dilations", {1, 1});

  const memory::desc src_md = act_md(x.shape, p.blocked[static_cast<size_t>(spec.in[0])] != 0);
  const memory::desc dst_md = act_md(y.shape, p.blocked[static_cast<size_t>(yid)] != 0);
  memory::dims wdims = to_dims(w.shape);
  memory::format_tag wtag = memory::format_tag::oihw;
  if (group > 1) {
    wdims = {group, w.shape[0] / group, w.shape[1], w.shape[2], w.shape[3]};
    wtag = memory::format_tag::goihw;
  }
  const memory::desc w_user_md(wdims, memory::data_type::f32, wtag);
  const memory::desc w_any_md(wdims, memory::data_type::f32, memory::format_tag::any);
  const memory::desc b_md({w.shape[0]}, memory::data_type::f32, memory::format_tag::x);

  dnnl::primitive_attr attr;
  dnnl::post_ops po;
  if (spec.fused_silu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, 1.f, 0.f);
  if (spec.fused_logistic) po.append_eltwise(1.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f);
  memory::desc res_md;
  if (spec.residual >= 0) {
    res_md = act_md(plan.values[static_cast<size_t>(spec.residual)].shape, p.blocked[static_cast<size_t>(spec.residual)] != 0);
    po.append_binary(dnnl::algorithm::binary_add, res_md);
  }
  attr.set_post_ops(po);
  const memory::dims strides{s[0], s[1]}, dil{d[0] - 1, d[1] - 1}, pl{pads[0], pads[1]}, pr{pads[2], pads[3]};
  const auto desc = has_bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                              dnnl::algorithm::convolution_direct, src_md, w_any_md,
                                                              b_md, dst_md, strides, dil, pl, pr)
                             : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                              dnnl::algorithm::convolution_direct, src_md, w_any_md,
                                                              dst_md, strides, dil, pl, pr);
  const dnnl::convolution_forward::primitive_desc pd(desc, attr, eng);
  st.prim = dnnl::convolution_forward(pd);
  // Weights reordered once into the layout the chosen kernel wants.
  memory w_user(w_user_md, eng, const_cast<void*>(w.value.data()));
  memory w_mem(pd.weights_desc(), eng);
  dnnl::reorder(w_user, w_mem).execute(strm, w_user, w_mem);
  p.stats.weight_bytes += pd.weights_desc().get_size();
  st.args[DNNL_ARG_SRC] = memory(src_md, eng, p.arena.get() + p.offset[static_cast<size_t>(spec.in[0])]);
  st.args[DNNL_ARG_WEIGHTS] = w_mem;
  if (has_bias) {
    memory b(b_md, eng);
    std::memcpy(b.get_data_handle(), plan.values[static_cast<size_t>(pn.in[2])].value.data(), b_md.get_size());
    st.args[DNNL_ARG_BIAS] = b;
  }
  st.args[DNNL_ARG_DST] = memory(dst_md, eng, p.arena.get() + p.offset[static_cast<size_t>(yid)]);
  if (spec.residual >= 0)
    st.args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(po.len() - 1) | DNNL_ARG_SRC_1] =
        memory(res_md, eng, p.arena.get() + p.offset[static_cast<size_t>(spec.residual)]);
  strm.wait();
}

Prepared& CpuEngine::Impl::prepare(const std::vector<Shape>& shapes) {
  auto it = cache.find(shapes);
  if (it == cache.end()) {
    if (cache.size() >= 8) cache.erase(cache.begin());  // bounded: dynamic-shape users
    it = cache.emplace(shapes, build(shapes)).first;
  }
  last = it->second.get();
  return *it->second;
}

CpuEngine::CpuEngine(std::shared_ptr<const Model> model, const CpuEngineOptions& options)
    : impl_(std::make_unique<Impl>()) {
  YOLOCU_CHECK(model, kInvalidArgument, "CpuEngine: null model");
  YOLOCU_CHECK(options.num_threads >= 0, kInvalidArgument, "CpuEngine: num_threads must be >= 0");
  impl_->model = std::move(model);
  impl_->options = options;
}

CpuEngine::~CpuEngine() = default;

const Model& CpuEngine::model() const { return *impl_->model; }

void CpuEngine::prepare(const std::vector<Shape>& input_shapes) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  translate_errors("CpuEngine::prepare", [&] { impl_->prepare(input_shapes); });
}

EngineStats CpuEngine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->last ? impl_->last->stats : EngineStats{};
}

std::vector<Tensor> CpuEngine::run(const std::vector<Tensor>& inputs) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return translate_errors("CpuEngine::run", [&] { return run_locked(inputs); });
}

std::vector<Tensor> CpuEngine::run_locked(const std::vector<Tensor>& inputs) {
  const Model& m = *impl_->model;
  YOLOCU_CHECK(inputs.size() == m.graph.inputs.size(), kInvalidArgument, "the model takes ", m.graph.inputs.size(),
               " input(s), ", inputs.size(), " given");
  std::vector<Shape> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    YOLOCU_CHECK(!inputs[i].empty() || inputs[i].numel() == 0, kInvalidArgument, "input '", m.graph.inputs[i].name, "' is empty");
    YOLOCU_CHECK(inputs[i].dtype() == m.graph.inputs[i].dtype, kInvalidArgument, "input '", m.graph.inputs[i].name,
                 "' must be ", dtype_name(m.graph.inputs[i].dtype), ", got ", dtype_name(inputs[i].dtype()));
    shapes.push_back(inputs[i].shape());
  }
  if (impl_->options.num_threads > 0) omp_set_num_threads(impl_->options.num_threads);
  Prepared& p = impl_->prepare(shapes);
  const Plan& plan = p.plan;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int id = plan.inputs[i];
    if (p.offset[static_cast<size_t>(id)] < 0) continue;  // input unused
    uint8_t* dst = p.arena.get() + p.offset[static_cast<size_t>(id)];
    if (inputs[i].dtype() == plan.values[static_cast<size_t>(id)].dtype) {
      std::memcpy(dst, inputs[i].data(), inputs[i].nbytes());
    } else {
      const Tensor c = cast_tensor(inputs[i], plan.values[static_cast<size_t>(id)].dtype);
      std::memcpy(dst, c.data(), c.nbytes());
    }
  }
  static const bool profile = std::getenv("YOLOCU_PROFILE") != nullptr;
  std::map<std::string, double> prof;
  for (Step& st : p.steps) {
    if (st.kind == StepKind::kNoop) continue;  // a Concat whose inputs were written in place
    const auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    switch (st.kind) {
      case StepKind::kConv:
      case StepKind::kReorder:
      case StepKind::kEltwise: st.prim.execute(impl_->strm, st.args); break;
      case StepKind::kMaxPoolBlocked: maxpool_blocked(st); break;
      case StepKind::kResizeBlocked: resize_blocked(st); break;
      case StepKind::kSplitBlocked: split_blocked(st); break;
      case StepKind::kDetectHead: detect_head(st); break;
      case StepKind::kNoop: break;  // not reached
      case StepKind::kNode: st.node->op->compute(st.node->node, plan.opset, st.in_ptrs, st.out_ptrs); break;
    }
    if (profile) {
      impl_->strm.wait();
      prof[st.kind == StepKind::kDetectHead ? "DetectHead" : st.node ? st.node->node.op_type : "Reorder"] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  impl_->strm.wait();
  if (profile)
    for (const auto& kv : prof) std::fprintf(stderr, "[profile] %-12s %8.2f ms\n", kv.first.c_str(), kv.second);
  std::vector<Tensor> outs;
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    const int id = plan.outputs[i];
    const auto& v = plan.values[static_cast<size_t>(id)];
    // cast_tensor copies (and converts where the model's output dtype differs): one copy per output
    outs.push_back(cast_tensor(v.constant ? v.value : Tensor::view(v.dtype, v.shape, p.arena.get() + p.offset[static_cast<size_t>(id)]),
                               plan.output_dtypes[i]));
  }
  return outs;
}

uint64_t default_max_memory() {
  static const uint64_t kDefault = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : uint64_t{16} << 30;
  }();
  return kDefault;
}

}  // namespace yolocu
