// GPU engine execution: the input conversion, each step's launch, CUDA graph capture and replay.
#include "engine/cuda/engine_impl.hpp"

namespace yolocu {

void CudaEngine::Impl::exec_step(BatchExec& be, size_t i, int batch, cudaStream_t s) {
  const GpuStep& st = sp.steps[i];
  const StepAux& a = aux[i];
  const engine::PlanNode* pn = st.node >= 0 ? &sp.plan.nodes[static_cast<size_t>(st.node)] : nullptr;
  switch (st.kind) {
    case GpuStepKind::kView: return;
    case GpuStepKind::kConv: {
      if (a.conv == direct_conv && be.direct_stem) return;  // computed with the input (convert_input)
      const ConvInfo& ci = convs[static_cast<size_t>(a.conv)];
      be.tactics[static_cast<size_t>(a.conv)]->run(cudnn.get(), conv_buffers(ci), s);
      return;
    }
    case GpuStepKind::kToNhwc: {
      const Shape xs = shape_at(st.in[0], batch);
      ck::nchw_to_nhwc(ptr(st.in[0]), false, ptr(st.out[0]), half, static_cast<int>(xs[0]), static_cast<int>(xs[1]),
                       static_cast<int>(xs[2]), static_cast<int>(xs[3]), s);
      return;
    }
    case GpuStepKind::kToPlain: {
      const Shape xs = shape_at(st.in[0], batch);
      ck::nhwc_to_nchw(ptr(st.in[0]), half, fptr(st.out[0]), static_cast<int>(xs[0]), static_cast<int>(xs[1]),
                       static_cast<int>(xs[2]), static_cast<int>(xs[3]), s);
      return;
    }
    case GpuStepKind::kEltwiseNhwc: {
      const ck::EltOp op = ck::elt_op(pn->node.op_type.c_str());
      ck::eltwise_flat(op, ptr(st.in[0]), st.in.size() > 1 ? ptr(st.in[1]) : nullptr, ptr(st.out[0]), half,
                       numel(shape_at(st.out[0], batch)), s);
      return;
    }
    case GpuStepKind::kConcatNhwc: {
      const Shape ys = shape_at(st.out[0], batch);
      const int64_t rows = ys[0] * ys[2] * ys[3];
      int64_t off = 0;
      for (int id : st.in) {
        const int64_t c = val(id).shape[1];
        if (sp.channel_offset[static_cast<size_t>(id)] >= 0) {  // its producer wrote it in place
          off += c;
          continue;
        }
        ck::copy_rows(ptr(id), c * static_cast<int64_t>(es), static_cast<uint8_t*>(ptr(st.out[0])) + off * static_cast<int64_t>(es),
                      ys[1] * static_cast<int64_t>(es), rows, c * static_cast<int64_t>(es), s);
        off += c;
      }
      return;
    }
    case GpuStepKind::kSplitNhwc: {
      const Shape ys = shape_at(st.out[0], batch);
      const int64_t src_pitch = sp.channel_pitch[static_cast<size_t>(st.in[0])] * static_cast<int64_t>(es);
      const int64_t c = ys[1] * static_cast<int64_t>(es);
      ck::copy_rows(static_cast<const uint8_t*>(ptr(st.in[0])) + a.split_start * static_cast<int64_t>(es), src_pitch,
                    ptr(st.out[0]), sp.channel_pitch[static_cast<size_t>(st.out[0])] * static_cast<int64_t>(es),
                    ys[0] * ys[2] * ys[3], c, s);
      return;
    }
    case GpuStepKind::kSoftmax: {
      const Shape xs = shape_at(st.in[0], batch);
      const int64_t r = static_cast<int64_t>(xs.size());
      const bool one_axis = sp.plan.opset >= 13;
      int64_t axis = pn->node.attr_int("axis", one_axis ? -1 : 1);
      if (axis < 0) axis += r;
      YOLOCU_CHECK(axis >= 0 && axis < std::max<int64_t>(r, 1), kInvalidArgument, pn->node.describe(), ": axis out of range");
      int64_t outer = 1, len = 1, inner = 1;
      for (int64_t d = 0; d < axis; ++d) outer *= xs[static_cast<size_t>(d)];
      for (int64_t d = axis; d < r; ++d) (d == axis || !one_axis ? len : inner) *= xs[static_cast<size_t>(d)];
      ck::softmax_plain(fptr(st.in[0]), fptr(st.out[0]), outer, len, inner, s);
      return;
    }
    case GpuStepKind::kMatMul: {
      const Shape as = shape_at(st.in[0], batch), bs = shape_at(st.in[1], batch), ys = shape_at(st.out[0], batch);
      ck::MatMulParams p;
      p.m = static_cast<int>(as[as.size() - 2]);
      p.k = static_cast<int>(as.back());
      p.n = static_cast<int>(bs.back());
      YOLOCU_CHECK(bs[bs.size() - 2] == p.k, kInvalidArgument, pn->node.describe(), ": shapes do not multiply");
      p.batch_rank = static_cast<int>(ys.size()) - 2;
      YOLOCU_CHECK(p.batch_rank <= ck::kMaxRank - 2, kUnsupported, pn->node.describe(), ": too many batch axes");
      // Batch strides (in matrices) of each operand, 0 where it broadcasts.
      for (int k = 0; k < 2; ++k) {
        const Shape& xs = k == 0 ? as : bs;
        const int lead = p.batch_rank - (static_cast<int>(xs.size()) - 2);
        int64_t stride = 1;
        for (int d = p.batch_rank; d-- > 0;) {
          int64_t v = 0;
          if (d >= lead) {
            const int64_t dim = xs[static_cast<size_t>(d - lead)];
            v = dim == 1 && ys[static_cast<size_t>(d)] != 1 ? 0 : stride;
            stride *= dim;
          }
          (k == 0 ? p.a_batch_stride : p.b_batch_stride)[d] = v;
        }
      }
      for (int d = 0; d < p.batch_rank; ++d) p.batch_dims[d] = ys[static_cast<size_t>(d)];
      ck::matmul_plain(fptr(st.in[0]), fptr(st.in[1]), fptr(st.out[0]), p, s);
      return;
    }
    case GpuStepKind::kMaxPool: {
      ck::PoolParams p = a.pool;
      p.n = static_cast<int>(shape_at(st.in[0], batch)[0]);
      ck::maxpool_nhwc(ptr(st.in[0]), ptr(st.out[0]), half, p, s);
      return;
    }
    case GpuStepKind::kSppf: {
      const Shape xs = shape_at(st.in[0], batch);
      ck::sppf_nhwc(ptr(st.in[0]), ptr(st.out[0]), half, static_cast<int>(xs[0]), static_cast<int>(xs[2]),
                    static_cast<int>(xs[3]), static_cast<int>(xs[1]),
                    static_cast<int>(sp.channel_pitch[static_cast<size_t>(st.in[0])]),
                    static_cast<int>(sp.channel_pitch[static_cast<size_t>(st.out[0])]), st.pool, s);
      return;
    }
    case GpuStepKind::kResize: {
      const Shape xs = shape_at(st.in[0], batch), ys = shape_at(st.out[0], batch);
      ck::resize_nearest_nhwc(ptr(st.in[0]), ptr(st.out[0]), half, static_cast<int>(xs[0]), static_cast<int>(xs[2]),
                              static_cast<int>(xs[3]), static_cast<int>(xs[1]), static_cast<int>(ys[2]),
                              static_cast<int>(ys[3]), static_cast<int>(sp.channel_pitch[static_cast<size_t>(st.out[0])]),
                              static_cast<const int*>(a.d_sy.get()),
                              static_cast<const int*>(a.d_sx.get()), s);
      return;
    }
    case GpuStepKind::kUnary:
      ck::unary_plain(ck::elt_op(pn->node.op_type.c_str()), fptr(st.in[0]), fptr(st.out[0]),
                      numel(shape_at(st.out[0], batch)), s);
      return;
    case GpuStepKind::kBinary: {
      const Shape ys = shape_at(st.out[0], batch);
      ck::StridedParams p;
      p.rank = static_cast<int>(ys.size());
      for (int d = 0; d < p.rank; ++d) p.out_dims[d] = ys[static_cast<size_t>(d)];
      for (int k = 0; k < 2; ++k) {
        const Shape xs = shape_at(st.in[static_cast<size_t>(k)], batch);
        const Shape str = row_major_strides(xs);
        const int lead = p.rank - static_cast<int>(xs.size());
        YOLOCU_CHECK(lead >= 0, kInternal, pn->node.describe(), ": input rank above output rank");
        for (int d = 0; d < p.rank; ++d) {
          int64_t v = 0;
          if (d >= lead) {
            const size_t xd = static_cast<size_t>(d - lead);
            v = (xs[xd] == 1 && ys[static_cast<size_t>(d)] != 1) ? 0 : str[xd];
          }
          (k == 0 ? p.a_strides : p.b_strides)[d] = v;
        }
      }
      ck::binary_plain(ck::elt_op(pn->node.op_type.c_str()), fptr(st.in[0]), fptr(st.in[1]), fptr(st.out[0]), p, s);
      return;
    }
    case GpuStepKind::kGather: {
      const Shape xs = shape_at(st.in[0], batch), ys = shape_at(st.out[0], batch);
      const Shape str = row_major_strides(xs);
      ck::StridedParams p;
      p.rank = static_cast<int>(ys.size());
      for (int d = 0; d < p.rank; ++d) p.out_dims[d] = ys[static_cast<size_t>(d)];
      const std::string& op = pn->node.op_type;
      if (op == "Transpose") {
        for (int d = 0; d < p.rank; ++d) p.a_strides[d] = str[static_cast<size_t>(a.perm[static_cast<size_t>(d)])];
      } else if (op == "Slice") {
        for (int d = 0; d < p.rank; ++d) {
          p.a_strides[d] = str[static_cast<size_t>(d)] * a.step[static_cast<size_t>(d)];
          p.a_base += a.start[static_cast<size_t>(d)] * str[static_cast<size_t>(d)];
        }
      } else {
        for (int d = 0; d < p.rank; ++d) p.a_strides[d] = str[static_cast<size_t>(d)];
        p.a_base = a.split_start * str[static_cast<size_t>(a.axis)];
      }
      ck::gather_plain(fptr(st.in[0]), fptr(st.out[0]), p, s);
      return;
    }
    case GpuStepKind::kConcat: {
      const Shape ys = shape_at(st.out[0], batch);
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < a.axis; ++d) outer *= ys[static_cast<size_t>(d)];
      for (size_t d = static_cast<size_t>(a.axis) + 1; d < ys.size(); ++d) inner *= ys[d];
      const int64_t dst_pitch = ys[static_cast<size_t>(a.axis)] * inner * 4;
      int64_t off = 0;
      for (int id : st.in) {
        const Shape xs = shape_at(id, batch);
        const int64_t chunk = xs[static_cast<size_t>(a.axis)] * inner * 4;
        ck::copy_rows(ptr(id), chunk, static_cast<uint8_t*>(ptr(st.out[0])) + off, dst_pitch, outer, chunk, s);
        off += chunk;
      }
      return;
    }
    case GpuStepKind::kDetectTail: {
      const int64_t rows = sp.heads[static_cast<size_t>(st.head)].rows;
      ck::TailLevels t;
      t.count = static_cast<int>(st.in.size());
      YOLOCU_CHECK(t.count <= ck::kMaxTailLevels, kUnsupported, "Detect head with ", t.count, " levels (at most ",
                   ck::kMaxTailLevels, ")");
      for (size_t l = 0; l < st.in.size(); ++l) {
        t.src[l] = ptr(st.in[l]);
        t.level[l] = a.tail_levels[l];
      }
      ck::detect_tail(t, half, fptr(st.out[0]), rows, batch, s);
      return;
    }
    case GpuStepKind::kCopy:
      YOLOCU_CUDA_CHECK(cudaMemcpyAsync(ptr(st.out[0]), ptr(st.in[0]),
                                        static_cast<size_t>(numel(shape_at(st.out[0], batch))) * 4,
                                        cudaMemcpyDeviceToDevice, s));
      return;
  }
}

void CudaEngine::Impl::enqueue_steps(BatchExec& be, int batch, cudaStream_t s, size_t first, size_t last) {
  YOLOCU_CUDNN_CHECK(cudnnSetStream(cudnn.get(), s));
  for (size_t i = first; i < std::min(last, sp.steps.size()); ++i) exec_step(be, i, batch, s);
}

void CudaEngine::Impl::capture(BatchExec& be, int batch) {
  cudaStream_t cs = capture_stream.get();
  // graph_segments graphs of consecutive steps (as equal in step count as they divide)
  const size_t n = sp.steps.size();
  const size_t k = std::max<size_t>(1, std::min(n, static_cast<size_t>(options.graph_segments)));
  std::vector<GraphExec> graphs;
  for (size_t seg = 0; seg < k; ++seg) {
    const size_t first = n * seg / k, last = n * (seg + 1) / k;
    YOLOCU_CUDA_CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue_steps(be, batch, cs, first, last);
    } catch (...) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(cs, &g);
      if (g) cudaGraphDestroy(g);
      (void)cudaGetLastError();
      throw;
    }
    cudaGraph_t g = nullptr;
    YOLOCU_CUDA_CHECK(cudaStreamEndCapture(cs, &g));
    CudaGraph graph(g);
    cudaGraphExec_t exec = nullptr;
    YOLOCU_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.get(), 0));
    graphs.emplace_back(exec);
  }
  be.graphs = std::move(graphs);
}

void CudaEngine::Impl::convert_input(const BatchExec& be, const void* d_input, int batch, cudaStream_t s) {
  if (be.direct_stem)
    run_direct_stem(d_input, batch, s);
  else if (stem_conv >= 0)
    ck::nchw_to_s2d_nhwc(d_input, half, stem_input.get(), half, batch, in_c, in_h, in_w, kStemChannels, s);
  else
    ck::nchw_to_nhwc(d_input, half, ptr(sp.plan.inputs[0]), half, batch, in_c, in_h, in_w, s);
}

void CudaEngine::Impl::run(const void* d_input, int batch, cudaStream_t s) {
  BatchExec& be = batch_exec(batch);
  // The input conversion (or the direct stem) stays outside the graph: the graph then never
  // depends on d_input.
  convert_input(be, d_input, batch, s);
  // The first run of a batch size is eager (it loads every kernel module outside any capture);
  // the second captures the graph, later ones replay it.
  if (options.cuda_graphs && !be.graph_failed && be.runs++ > 0) {
    if (be.graphs.empty()) {
      try {
        capture(be, batch);
      } catch (const Error&) {
        be.graph_failed = true;  // run eagerly from now on (still correct, only slower)
        (void)cudaGetLastError();
      }
    }
    if (!be.graphs.empty()) {
      for (const GraphExec& g : be.graphs) YOLOCU_CUDA_CHECK(cudaGraphLaunch(g.get(), s));
      return;
    }
  }
  enqueue_steps(be, batch, s);
}

}  // namespace yolocu
