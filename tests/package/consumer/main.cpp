// Loads a model through the installed yolocu headers and library; prints what it found.
#include <cstdio>

#include <yolocu/engine.hpp>
#include <yolocu/error.hpp>
#include <yolocu/model.hpp>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::printf("supported ops: %zu\n", yolocu::supported_ops().size());
    return yolocu::supported_ops().empty() ? 1 : 0;
  }
  try {
    auto m = std::make_shared<yolocu::Model>(yolocu::load_onnx(argv[1]));
    yolocu::CpuEngine engine(m);
    std::printf("opset %lld, %zu classes\n", static_cast<long long>(m->opset), m->class_names().size());
    return 0;
  } catch (const yolocu::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
