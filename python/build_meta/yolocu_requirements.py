"""scikit-build-core metadata provider (pyproject.toml: [tool.scikit-build.metadata.dependencies]):
the package's dependencies, plus NVIDIA's CUDA runtime wheels when `pip install .` builds the
extension with CUDA, so that a CUDA build imports in any environment (python/yolocu/_cuda_libs.py
finds the libraries in those wheels).

Whether the build has CUDA follows cmake/YolocuCuda.cmake: the environment variable YOLOCU_CUDA
(ON / OFF / AUTO, default AUTO); AUTO means a CUDA compiler and cuDNN's header are found, looked
for where CMake looks: $CUDACXX, nvcc on PATH, /usr/local/cuda, and the toolkit that
`scripts/setup.sh --cuda` installs into .venv.
"""
from __future__ import annotations

import glob
import os
import shutil
from typing import Any, List, Mapping, Optional

_ON = {"ON", "1", "TRUE", "YES", "Y"}
_OFF = {"OFF", "0", "FALSE", "NO", "N"}


def _nvcc() -> Optional[str]:
    for cand in (os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc", ".venv/cuda/bin/nvcc"):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return os.path.realpath(cand)
    return None


def _has_cudnn(nvcc: str) -> bool:
    toolkit = os.path.dirname(os.path.dirname(nvcc))
    roots = [os.environ.get("CUDNN_ROOT"), toolkit, ".venv/cudnn", "/usr", "/usr/local"]
    for root in filter(None, roots):
        pats = [os.path.join(root, "include", "cudnn.h"), os.path.join(root, "include", "*", "cudnn.h"),
                os.path.join(root, "targets", "*", "include", "cudnn.h")]
        if any(glob.glob(p) for p in pats):
            return True
    return False


def cuda_build(env: Mapping[str, str] = os.environ) -> bool:
    """Whether CMake will build the extension with CUDA (the same decision as YOLOCU_CUDA)."""
    choice = env.get("YOLOCU_CUDA", "AUTO").strip().upper()
    if choice in _OFF:
        return False
    if choice in _ON:
        return True
    nvcc = _nvcc()
    return bool(nvcc) and _has_cudnn(nvcc)


def dynamic_metadata(field: str, settings: Mapping[str, Any], project: Any = None) -> List[str]:
    if field != "dependencies":
        raise RuntimeError(f"yolocu_requirements provides 'dependencies' only, not {field!r}")
    deps = list(settings.get("base", []))
    if cuda_build():
        deps += list(settings.get("cuda", []))
    return deps
