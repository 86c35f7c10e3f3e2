// GPU engine, per step: weights (KRSC; the space-to-depth stem's regrouped 3x3 filter; output
// channels padded to the value's pitch), biases, resize and Detect-tail tables, constants.
#include "engine/cuda/engine_impl.hpp"

namespace yolocu {

void CudaEngine::Impl::upload_const(int id) {
  if (id < 0 || !val(id).constant || consts.count(id)) return;
  const Tensor& t = val(id).value;
  YOLOCU_CHECK(t.dtype() == DType::kFloat32, kUnsupported, "GPU engine: constant '", val(id).name, "' of type ",
               dtype_name(t.dtype()), " used at run time");
  DeviceMem m = alloc(std::max<size_t>(t.nbytes(), 4), "constants");
  if (t.nbytes()) YOLOCU_CUDA_CHECK(cudaMemcpy(m.get(), t.data(), t.nbytes(), cudaMemcpyHostToDevice));
  stats.weight_bytes += t.nbytes();
  consts.emplace(id, std::move(m));
}

void CudaEngine::Impl::setup_step(size_t i) {
  const GpuStep& st = sp.steps[i];
  StepAux& a = aux[i];
  const engine::PlanNode* pn = st.node >= 0 ? &sp.plan.nodes[static_cast<size_t>(st.node)] : nullptr;
  const bool multi_batch = options.max_batch > 1;
  switch (st.kind) {
    case GpuStepKind::kConv: {
      const Node& n = pn->node;
      ConvInfo ci;
      ci.step = static_cast<int>(i);
      ci.name = n.name;
      ci.x = st.in[0];
      ci.y = st.out[0];
      ci.residual = st.residual;
      const Tensor& w = val(st.in[1]).value;
      YOLOCU_CHECK(w.rank() == 4 && w.dtype() == DType::kFloat32, kUnsupported, n.describe(),
                   ": only 2-D convolutions with float weights are supported, weights ", shape_str(w.shape()));
      engine::ConvProblem& p = ci.pb;
      const int k = static_cast<int>(w.dim(0)), cg = static_cast<int>(w.dim(1));
      const int r = static_cast<int>(w.dim(2)), sz = static_cast<int>(w.dim(3));
      p.group = static_cast<int>(n.attr_int("group", 1));
      const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
      const auto str = n.attr_ints("strides", {1, 1});
      const auto dil = n.attr_ints("dilations", {1, 1});
      YOLOCU_CHECK(str.size() == 2 && dil.size() == 2 && pads.size() == 4, kUnsupported, n.describe(),
                   ": only 2-D convolutions are supported");
      YOLOCU_CHECK(pads[0] == pads[2] && pads[1] == pads[3], kUnsupported, n.describe(),
                   ": asymmetric padding is not supported by the GPU engine");
      const Shape& xs = val(ci.x).shape;
      const Shape& ys = val(ci.y).shape;
      YOLOCU_CHECK(xs[1] == int64_t{cg} * p.group, kInvalidArgument, n.describe(), ": input has ", xs[1],
                   " channels, weights expect ", int64_t{cg} * p.group);
      p.n = options.max_batch;
      p.c = static_cast<int>(sp.channel_pitch[static_cast<size_t>(ci.x)]);
      p.h = static_cast<int>(xs[2]);
      p.w = static_cast<int>(xs[3]);
      // Output channels as stored (the fused Detect tail's padding included); a copy-free Concat's
      // input writes its k channels with the Concat's channel count as pixel pitch.
      const bool in_place = sp.channel_offset[static_cast<size_t>(ci.y)] >= 0;
      p.k = static_cast<int>(in_place ? ys[1] : sp.channel_pitch[static_cast<size_t>(ci.y)]);
      if (in_place) p.yp = static_cast<int>(sp.channel_pitch[static_cast<size_t>(ci.y)]);
      p.r = r;
      p.s = sz;
      p.p = static_cast<int>(ys[2]);
      p.q = static_cast<int>(ys[3]);
      p.pad_h = static_cast<int>(pads[0]);
      p.pad_w = static_cast<int>(pads[1]);
      p.str_h = static_cast<int>(str[0]);
      p.str_w = static_cast<int>(str[1]);
      p.dil_h = static_cast<int>(dil[0]);
      p.dil_w = static_cast<int>(dil[1]);
      p.half = half;
      p.bias = st.in[2] >= 0;
      p.silu = st.silu;
      p.residual = st.residual >= 0;
      YOLOCU_CHECK(p.c == xs[1], kInternal, n.describe(), ": reads a channel-padded value");
      ci.s2d = options.space_to_depth_stem && is_s2d_stem(ci, sp.plan.inputs[0], input_readers, in_h, in_w);
      // Weights OIHW -> KRSC, output channels padded to p.k with zeros. The space-to-depth stem:
      // W'[o, a, b, ch * 4 + dy * 2 + dx] = W[o, ch, 2a + dy, 2b + dx] on a 3x3 filter of
      // kStemChannels input channels (the sums of the 6x6 stride-2 convolution, regrouped).
      const float* src = w.data_as<float>();
      // The network's first convolution, alone on the input: the direct stem kernel may run it
      // (p still has the ONNX layer's shape here).
      if (half && options.direct_stem && ci.x == sp.plan.inputs[0] && input_readers == 1 && p.group == 1 &&
          p.str_h == 2 && p.str_w == 2 && p.dil_h == 1 && p.dil_w == 1 && xs[1] == in_c)
        setup_direct_stem(ci, static_cast<int>(convs.size()), src, k);
      auto at = [&](int o, int c, int y, int x) {
        return src[((static_cast<size_t>(o) * cg + c) * r + y) * sz + x];
      };
      std::vector<float> krsc;
      if (ci.s2d) {
        p.c = kStemChannels;
        p.h = in_h / 2;
        p.w = in_w / 2;
        p.r = p.s = 3;
        p.str_h = p.str_w = 1;
        p.pad_h = p.pad_w = 1;
        krsc.assign(static_cast<size_t>(p.k) * 9 * kStemChannels, 0.f);
        for (int o = 0; o < k; ++o)
          for (int fy = 0; fy < 3; ++fy)
            for (int fx = 0; fx < 3; ++fx)
              for (int ch = 0; ch < cg; ++ch)
                for (int dy = 0; dy < 2; ++dy)
                  for (int dx = 0; dx < 2; ++dx)
                    krsc[((static_cast<size_t>(o) * 3 + fy) * 3 + fx) * kStemChannels + ch * 4 + dy * 2 + dx] =
                        at(o, ch, 2 * fy + dy, 2 * fx + dx);
      } else {
        krsc.assign(static_cast<size_t>(p.k) * r * sz * cg, 0.f);
        for (int o = 0; o < k; ++o)
          for (int c = 0; c < cg; ++c)
            for (int y = 0; y < r; ++y)
              for (int x = 0; x < sz; ++x)
                krsc[((static_cast<size_t>(o) * r + y) * sz + x) * cg + c] = at(o, c, y, x);
      }
      const size_t cnt = krsc.size();
      ci.d_w = alloc(cnt * es, "weights");
      if (half) {
        std::vector<uint16_t> h(cnt);
        for (size_t j = 0; j < cnt; ++j) h[j] = float_to_half(krsc[j]);
        YOLOCU_CUDA_CHECK(cudaMemcpy(ci.d_w.get(), h.data(), cnt * 2, cudaMemcpyHostToDevice));
      } else {
        YOLOCU_CUDA_CHECK(cudaMemcpy(ci.d_w.get(), krsc.data(), cnt * 4, cudaMemcpyHostToDevice));
      }
      stats.weight_bytes += cnt * es;
      if (p.bias) {
        const Tensor& b = val(st.in[2]).value;
        YOLOCU_CHECK(b.dtype() == DType::kFloat32 && b.numel() == k, kInvalidArgument, n.describe(), ": bias has ",
                     b.numel(), " elements, expected ", k);
        std::vector<float> bias(static_cast<size_t>(p.k), 0.f);
        std::copy(b.data_as<float>(), b.data_as<float>() + k, bias.begin());
        ci.d_bias = alloc(bias.size() * 4, "bias");
        YOLOCU_CUDA_CHECK(cudaMemcpy(ci.d_bias.get(), bias.data(), bias.size() * 4, cudaMemcpyHostToDevice));
        stats.weight_bytes += bias.size() * 4;
        if (half && options.cutlass_tactics) {
          std::vector<uint16_t> hb(bias.size());
          for (size_t j = 0; j < bias.size(); ++j) hb[j] = float_to_half(bias[j]);
          ci.d_bias_act = alloc(hb.size() * 2, "bias");
          YOLOCU_CUDA_CHECK(cudaMemcpy(ci.d_bias_act.get(), hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
          stats.weight_bytes += hb.size() * 2;
        }
      }
      stats.conv_flops_per_image += 2.0 * k * cg * r * sz * static_cast<double>(ys[2] * ys[3]);
      a.conv = static_cast<int>(convs.size());
      if (ci.s2d) stem_conv = a.conv;
      convs.push_back(std::move(ci));
      break;
    }
    case GpuStepKind::kMaxPool: {
      const Node& n = pn->node;
      const auto k = n.attr_ints("kernel_shape");
      const auto str = n.attr_ints("strides", {1, 1});
      const auto pads = n.attr_ints("pads", {0, 0, 0, 0});
      YOLOCU_CHECK(k.size() == 2 && str.size() == 2 && pads.size() == 4, kUnsupported, n.describe(),
                   ": only 2-D max pooling is supported");
      const Shape& xs = val(st.in[0]).shape;
      const Shape& ys = val(st.out[0]).shape;
      a.pool = {0, static_cast<int>(xs[2]), static_cast<int>(xs[3]), static_cast<int>(xs[1]), static_cast<int>(ys[2]),
                static_cast<int>(ys[3]), static_cast<int>(k[0]), static_cast<int>(k[1]), static_cast<int>(str[0]),
                static_cast<int>(str[1]), static_cast<int>(pads[0]), static_cast<int>(pads[1])};
      break;
    }
    case GpuStepKind::kResize: {
      const auto idx = engine::resize_indices(sp.plan, *pn);
      YOLOCU_CHECK(idx.size() == 4, kInternal, pn->node.describe(), ": resize index tables");
      auto upload = [&](const std::vector<int64_t>& v) {
        std::vector<int> t(v.begin(), v.end());
        DeviceMem m = alloc(std::max<size_t>(t.size(), 1) * sizeof(int), "resize tables");
        YOLOCU_CUDA_CHECK(cudaMemcpy(m.get(), t.data(), t.size() * sizeof(int), cudaMemcpyHostToDevice));
        return m;
      };
      a.d_sy = upload(idx[2]);
      a.d_sx = upload(idx[3]);
      break;
    }
    case GpuStepKind::kGather: {
      const Node& n = pn->node;
      const Shape& xs = val(st.in[0]).shape;
      const int64_t rank = static_cast<int64_t>(xs.size());
      const Shape& ys = val(st.out[0]).shape;
      if (n.op_type == "Transpose") {
        a.perm = n.attr_ints("perm", {});
        if (a.perm.empty())
          for (int64_t d = rank; d-- > 0;) a.perm.push_back(d);
        YOLOCU_CHECK(static_cast<int64_t>(a.perm.size()) == rank, kParse, n.describe(), ": perm has wrong rank");
        YOLOCU_CHECK(!multi_batch || a.perm[0] == 0, kUnsupported, n.describe(),
                     ": transposing the batch axis is not supported with max_batch > 1");
      } else if (n.op_type == "Slice") {
        std::vector<int64_t> starts, axes, steps;
        if (sp.plan.opset >= 10) {
          auto cint = [&](size_t k) {
            if (pn->in.size() <= k || pn->in[k] < 0) return std::vector<int64_t>{};
            YOLOCU_CHECK(val(pn->in[k]).constant, kUnsupported, n.describe(), ": slice parameters must be constant");
            return ops::to_int_vector(val(pn->in[k]).value);
          };
          starts = cint(1);
          axes = cint(3);
          steps = cint(4);
        } else {
          starts = n.attr_ints("starts");
          axes = n.attr_ints("axes");
        }
        if (axes.empty())
          for (size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<int64_t>(d));
        a.start.assign(static_cast<size_t>(rank), 0);
        a.step.assign(static_cast<size_t>(rank), 1);
        for (size_t j = 0; j < axes.size(); ++j) {
          int64_t ax = axes[j] < 0 ? axes[j] + rank : axes[j];
          YOLOCU_CHECK(ax >= 0 && ax < rank && j < starts.size(), kParse, n.describe(), ": bad slice axes");
          const int64_t stp = j < steps.size() ? steps[j] : 1;
          YOLOCU_CHECK(stp != 0, kParse, n.describe(), ": slice step 0");
          const int64_t dim = xs[static_cast<size_t>(ax)];
          int64_t s0 = starts[j] < 0 ? starts[j] + dim : starts[j];
          s0 = stp > 0 ? std::clamp<int64_t>(s0, 0, dim) : std::clamp<int64_t>(s0, 0, dim - 1);
          a.start[static_cast<size_t>(ax)] = s0;
          a.step[static_cast<size_t>(ax)] = stp;
        }
        YOLOCU_CHECK(!multi_batch || (a.start[0] == 0 && a.step[0] == 1 && ys[0] == xs[0]), kUnsupported,
                     n.describe(), ": slicing the batch axis is not supported with max_batch > 1");
      } else {  // Split
        int64_t axis = n.attr_int("axis", 0);
        if (axis < 0) axis += rank;
        a.axis = static_cast<int>(axis);
        YOLOCU_CHECK(axis > 0 || !multi_batch, kUnsupported, n.describe(),
                     ": splitting the batch axis is not supported with max_batch > 1");
        for (int k = 0; k < st.out_index; ++k)
          if (pn->out[static_cast<size_t>(k)] >= 0) a.split_start += val(pn->out[static_cast<size_t>(k)]).shape[static_cast<size_t>(axis)];
      }
      break;
    }
    case GpuStepKind::kSplitNhwc: {
      // Channel offset of this output: the sizes of the outputs before it, from the node's split
      // sizes (input 2 from opset 13, else the attribute; none: equal parts).
      const Node& n = pn->node;
      const int64_t c = val(st.in[0]).shape[1];
      std::vector<int64_t> sizes;
      if (pn->in.size() > 1 && pn->in[1] >= 0) {
        const Tensor& t = val(pn->in[1]).value;
        YOLOCU_CHECK(val(pn->in[1]).constant && t.dtype() == DType::kInt64, kUnsupported, n.describe(),
                     ": split sizes computed at run time are not supported on the GPU");
        sizes.assign(t.data_as<int64_t>(), t.data_as<int64_t>() + t.numel());
      } else {
        sizes = n.attr_ints("split", {});
      }
      const int64_t parts = static_cast<int64_t>(pn->out.size());
      if (sizes.empty()) sizes.assign(static_cast<size_t>(parts), parts > 0 ? c / parts : 0);
      YOLOCU_CHECK(static_cast<int64_t>(sizes.size()) == parts, kInvalidArgument, n.describe(), ": ", sizes.size(),
                   " split sizes for ", parts, " outputs");
      a.split_start = 0;
      for (int k = 0; k < st.out_index; ++k) a.split_start += sizes[static_cast<size_t>(k)];
      YOLOCU_CHECK(a.split_start + val(st.out[0]).shape[1] <= c, kInvalidArgument, n.describe(),
                   ": split sizes exceed the ", c, " channels");
      break;
    }
    case GpuStepKind::kSoftmax:
      break;
    case GpuStepKind::kMatMul:
      for (int id : st.in) upload_const(id);
      break;
    case GpuStepKind::kConcat: {
      int64_t axis = pn->node.attr_int("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(val(st.out[0]).shape.size());
      a.axis = static_cast<int>(axis);
      YOLOCU_CHECK(axis > 0 || !multi_batch, kUnsupported, pn->node.describe(),
                   ": concatenating along the batch axis is not supported with max_batch > 1");
      for (int id : st.in) upload_const(id);
      break;
    }
    case GpuStepKind::kBinary:
    case GpuStepKind::kUnary:
      ck::elt_op(pn->node.op_type.c_str());  // throws for an op without kernel
      for (int id : st.in) upload_const(id);
      break;
    case GpuStepKind::kEltwiseNhwc:
      ck::elt_op(pn->node.op_type.c_str());
      break;
    case GpuStepKind::kDetectTail:
      for (const engine::DetectLevel& L : sp.heads[static_cast<size_t>(st.head)].levels) {
        std::vector<float> t;
        engine::tail::tables_of(L, &t);
        DeviceMem m = alloc(t.size() * sizeof(float), "Detect tail tables");
        YOLOCU_CUDA_CHECK(cudaMemcpy(m.get(), t.data(), t.size() * sizeof(float), cudaMemcpyHostToDevice));
        stats.weight_bytes += t.size() * sizeof(float);
        a.tail_levels.push_back(engine::tail::level_from(L, static_cast<const float*>(m.get())));
        a.tail_levels.back().pitch = sp.channel_pitch[static_cast<size_t>(st.in[a.tail_levels.size() - 1])];
        a.tail_tables.push_back(std::move(m));
      }
      break;
    default: break;
  }
}

}  // namespace yolocu
