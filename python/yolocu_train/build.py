"""Builds (JIT, cached) and loads the yolocu training extension into this process.

The extension compiles the yolocu_training sources (src/training, plus src/core/error.cpp and
tensor.cpp) together with csrc/ops.cpp against the installed torch, so no separately installed
library is needed. CUDA kernels are built when torch has CUDA and nvcc is found (set
TORCH_CUDA_ARCH_LIST, e.g. 9.0, to keep the build short); otherwise a CPU-only build with the
reference implementations. Importing yolocu_train calls load() once.

    python -m yolocu_train.build          # build now, print the library path
"""
import glob
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(_HERE, "..", ".."))


def _want_cuda():
    import torch
    from torch.utils import cpp_extension
    if os.environ.get("YOLOCU_TRAIN_CPU_ONLY") == "1":
        return False
    return torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None


def load(verbose=False, build_dir=None):
    import torch
    from torch.utils import cpp_extension

    cuda = _want_cuda()
    src = os.path.join(REPO, "src")
    sources = [os.path.join(_HERE, "csrc", "ops.cpp"),
               os.path.join(src, "core", "error.cpp"), os.path.join(src, "core", "tensor.cpp")]
    sources += sorted(f for f in glob.glob(os.path.join(src, "training", "*.cpp")) if not f.endswith("cuda_stubs.cpp"))
    name = "yolocu_train_ops"
    cflags = ["-O3", "-std=c++17"]
    if cuda:
        sources += sorted(glob.glob(os.path.join(src, "training", "*.cu")))
        cflags += ["-DYOLOCU_TRAIN_WITH_CUDA=1", "-DYOLOCU_TRAINING_WITH_CUDA=1"]
        name += "_cuda"
    else:
        sources.append(os.path.join(src, "training", "cuda_stubs.cpp"))
        name += "_cpu"
    build_dir = build_dir or os.environ.get("YOLOCU_TRAIN_BUILD_DIR") or os.path.join(REPO, "build", "yolocu_train_ext")
    build_dir = os.path.join(build_dir, name)
    os.makedirs(build_dir, exist_ok=True)
    cpp_extension.load(
        name=name, sources=sources, extra_cflags=cflags,
        extra_cuda_cflags=["-O3", "--expt-relaxed-constexpr", "-std=c++17"],
        extra_include_paths=[os.path.join(REPO, "include"), src],
        build_directory=build_dir, is_python_module=False, with_cuda=cuda, verbose=verbose)
    return os.path.join(build_dir, name + ".so"), cuda


if __name__ == "__main__":
    path, cuda = load(verbose=True)
    print(f"yolocu training ops built: {path} (cuda={cuda})")
