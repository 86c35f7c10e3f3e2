// The GPU engine's step registry (src/engine/cuda/steps/registry.cpp): every step kind has its step
// class, and a step reads, writes and is named as its planned GpuStep. Constructing a step touches no
// device (setup and launch do), so this runs without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "engine/cuda/gpu_steps.hpp"
#include "engine/cuda/steps/step.hpp"

namespace yolocu {
namespace {

using engine::GpuStep;
using engine::GpuStepKind;

TEST(GpuStepRegistry, EveryKindHasItsStep) {
  int kinds = 0;
  // The kinds in declaration order, up to the first value gpu_step_kind_name does not know.
  for (int k = 0; std::string(engine::gpu_step_kind_name(static_cast<GpuStepKind>(k))) != "?"; ++k, ++kinds) {
    GpuStep st;
    st.kind = static_cast<GpuStepKind>(k);
    st.in = {3, -1, 5};
    st.out = {7};
    st.label = std::string("step ") + engine::gpu_step_kind_name(st.kind);
    const auto step = cuda_engine_internal::make_step(st);
    ASSERT_NE(step, nullptr) << st.label;
    EXPECT_EQ(step->kind(), st.kind);
    EXPECT_EQ(step->reads(), st.in);
    EXPECT_EQ(step->writes(), st.out);
    EXPECT_EQ(step->name(), st.label);
    EXPECT_EQ(step->conv_layer(), -1) << st.label;  // a Conv step has its layer only after setup
  }
  EXPECT_GE(kinds, 18);  // at least the kinds of gpu_steps.hpp today
}

}  // namespace
}  // namespace yolocu
