// The "packin" tactic family: a layer whose input or residual is a channel view of a wider NHWC
// buffer (ConvProblem::xp / rp: a C2f's Split output, a Concat input that a convolution also reads)
// runs any tactic of the same layer on packed inputs: x (and a pitched residual) are copied packed
// into the front of the workspace (one strided row copy each), then the inner tactic runs on
// ConvProblem::packed_inputs() with the rest of the workspace. Always available where the copies
// fit the workspace, so a pitched layer is never slower than "copy, then the best packed tactic"
// (the tuner offers the wrapper of the packed problem's choice beside the native candidates of the
// families that read pitched inputs). Id: "packin:<inner id>".
#include <string>
#include <utility>

#include "core/cuda_check.hpp"
#include "engine/cuda/cuda_kernels.hpp"
#include "engine/cuda/tactics/conv_tactic.hpp"

namespace yolocu::engine {
namespace {

constexpr char kPrefix[] = "packin:";
constexpr size_t kAlign = 256;

size_t align_up(size_t b) { return (b + kAlign - 1) / kAlign * kAlign; }
size_t elem_bytes(const ConvProblem& pb) { return pb.half ? 2 : 4; }
bool x_pitched(const ConvProblem& pb) { return pb.x_pitch() != pb.c; }
bool r_pitched(const ConvProblem& pb) { return pb.residual && pb.r_pitch() != pb.k; }
// Bytes of the packed copies: x's (if pitched), then the residual's (if pitched), each aligned.
size_t x_copy_bytes(const ConvProblem& pb) {
  return x_pitched(pb) ? align_up(static_cast<size_t>(pb.n) * pb.h * pb.w * pb.c * elem_bytes(pb)) : 0;
}
size_t r_copy_bytes(const ConvProblem& pb) {
  return r_pitched(pb) ? align_up(static_cast<size_t>(pb.n) * pb.p * pb.q * pb.k * elem_bytes(pb)) : 0;
}

class PackedInputTactic final : public ConvTactic {
 public:
  PackedInputTactic(const ConvProblem& pb, std::shared_ptr<const ConvTactic> inner)
      : pb_(pb), inner_(std::move(inner)), x_bytes_(x_copy_bytes(pb)), r_bytes_(r_copy_bytes(pb)) {
    id_ = kPrefix + inner_->id();
    name_ = "packed copy + " + inner_->name();
  }
  const std::string& id() const override { return id_; }
  const std::string& name() const override { return name_; }
  size_t workspace() const override { return x_bytes_ + r_bytes_ + inner_->workspace(); }
  int kernels() const override { return inner_->kernels() + (x_bytes_ ? 1 : 0) + (r_bytes_ ? 1 : 0); }

  void run(cudnnHandle_t cudnn, const ConvBuffers& b, cudaStream_t s) const override {
    YOLOCU_CHECK(b.ws_bytes >= workspace() && b.ws, kInternal, "conv ", pb_.signature(), ": workspace of ",
                 b.ws_bytes, " bytes, the packed copies need ", workspace());
    const int64_t es = static_cast<int64_t>(elem_bytes(pb_));
    uint8_t* ws = static_cast<uint8_t*>(b.ws);
    ConvBuffers in = b;
    if (x_bytes_) {
      cuda_kernels::copy_rows(b.x, pb_.x_pitch() * es, ws, pb_.c * es, int64_t{pb_.n} * pb_.h * pb_.w, pb_.c * es, s);
      in.x = ws;
    }
    if (r_bytes_) {
      cuda_kernels::copy_rows(b.residual, pb_.r_pitch() * es, ws + x_bytes_, pb_.k * es,
                              int64_t{pb_.n} * pb_.p * pb_.q, pb_.k * es, s);
      in.residual = ws + x_bytes_;
    }
    in.ws = ws + x_bytes_ + r_bytes_;
    in.ws_bytes = b.ws_bytes - x_bytes_ - r_bytes_;
    if (in.ws_bytes == 0) in.ws = nullptr;
    inner_->run(cudnn, in, s);
  }
  bool serialize_plan(std::vector<uint8_t>* out) const override { return inner_->serialize_plan(out); }
  bool restored_from_plan() const override { return inner_->restored_from_plan(); }
  bool compiled_at_runtime() const override { return inner_->compiled_at_runtime(); }

 private:
  ConvProblem pb_;
  std::shared_ptr<const ConvTactic> inner_;
  size_t x_bytes_, r_bytes_;
  std::string id_, name_;
};

// The inner tactic's limits: the workspace the copies leave; false if they alone exceed it.
bool inner_limits(const ConvProblem& pb, const TacticLimits& lim, TacticLimits* inner) {
  const size_t copies = packin_copy_bytes(pb);
  if (copies > lim.workspace) return false;
  *inner = lim;
  inner->workspace = lim.workspace - copies;
  return true;
}

bool inner_id(const std::string& id, std::string* inner) {
  if (id.rfind(kPrefix, 0) != 0) return false;
  *inner = id.substr(sizeof kPrefix - 1);
  return !inner->empty() && inner->rfind(kPrefix, 0) != 0;  // never a wrapper of a wrapper
}

}  // namespace

size_t packin_copy_bytes(const ConvProblem& pb) { return x_copy_bytes(pb) + r_copy_bytes(pb); }

TacticPtr wrap_packin(const ConvProblem& pb, std::shared_ptr<const ConvTactic> inner, const TacticLimits& lim) {
  if (!inner || pb.inputs_packed() || inner->id().rfind(kPrefix, 0) == 0) return nullptr;
  if (packin_copy_bytes(pb) + inner->workspace() > lim.workspace) return nullptr;
  return std::make_unique<PackedInputTactic>(pb, std::move(inner));
}

TacticPtr make_packin(cudnnHandle_t cudnn, const ConvProblem& pb, const std::string& id, const TacticLimits& lim,
                      const std::vector<uint8_t>* plan) {
  std::string inner;
  TacticLimits il;
  if (pb.inputs_packed() || !inner_id(id, &inner) || !inner_limits(pb, lim, &il)) return nullptr;
  TacticPtr t = make_tactic(cudnn, pb.packed_inputs(), inner, il, plan);
  if (!t) return nullptr;
  return wrap_packin(pb, std::shared_ptr<const ConvTactic>(std::move(t)), lim);
}

TacticPtr restore_tactic(cudnnHandle_t cudnn, const ConvProblem& pb, const std::string& id, const TacticLimits& lim,
                         const std::vector<uint8_t>& plan) {
  std::string inner;
  if (!inner_id(id, &inner)) return restore_cudnn_graph(cudnn, pb, id, lim, plan);
  TacticLimits il;
  if (pb.inputs_packed() || !inner_limits(pb, lim, &il)) return nullptr;
  TacticPtr t = restore_cudnn_graph(cudnn, pb.packed_inputs(), inner, il, plan);
  if (!t) return nullptr;
  return wrap_packin(pb, std::shared_ptr<const ConvTactic>(std::move(t)), lim);
}

}  // namespace yolocu::engine
