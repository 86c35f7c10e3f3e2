"""Finds the CUDA libraries a CUDA build of yolocu links (the CUDA runtime, cuBLAS, NVRTC, cuDNN,
nvJPEG) before the extension is loaded, wherever pip put them.

A CUDA build records the libraries its extension needs (their sonames) in `_build_config.py`.
`pip install .` of such a build depends on NVIDIA's runtime wheels (nvidia-cuda-runtime,
nvidia-cublas, nvidia-cuda-nvrtc, nvidia-cudnn-cu13, nvidia-nvjpeg), which install the libraries
under `site-packages/nvidia/<pkg>/lib`. The extension's RUNPATH names those folders relative to
itself, which covers wheels installed beside it; this module covers the rest (wheels in another
entry of sys.path, e.g. a user site or a venv with system site-packages) the way torch does:
each library found under an `nvidia/*/lib` folder of sys.path is loaded RTLD_GLOBAL by its full
path, so that the loader resolves the extension's dependency on that soname to it. A library
found in no wheel is left to the system loader (a CUDA toolkit on the loader path).
"""
from __future__ import annotations

import ctypes
import glob
import os
import sys
from typing import Dict, List, Optional, Sequence

# soname prefix -> the PyPI wheel that ships it (for the error message)
_WHEELS = {
    "libcudart": "nvidia-cuda-runtime",
    "libcublasLt": "nvidia-cublas",
    "libcublas": "nvidia-cublas",
    "libnvrtc": "nvidia-cuda-nvrtc",
    "libcudnn": "nvidia-cudnn-cu13",
    "libnvjpeg": "nvidia-nvjpeg",
}

# soname -> the path it was loaded from ("" = by soname, through the system loader)
loaded: Dict[str, str] = {}


def wheel_for(soname: str) -> str:
    """The PyPI wheel that ships `soname` (e.g. libnvjpeg.so.13 -> nvidia-nvjpeg)."""
    stem = soname.split(".so", 1)[0]
    return _WHEELS.get(stem, "the NVIDIA wheel that ships " + soname)


def find_in_wheels(soname: str, paths: Optional[Sequence[str]] = None) -> Optional[str]:
    """The first `<entry>/nvidia/*/lib/<soname>` over the entries of `paths` (default sys.path)."""
    for entry in sys.path if paths is None else paths:
        if not entry or not os.path.isdir(os.path.join(entry, "nvidia")):
            continue
        hits = sorted(glob.glob(os.path.join(glob.escape(entry), "nvidia", "*", "lib", soname)))
        if hits:
            return hits[0]
    return None


def library_dirs(paths: Optional[Sequence[str]] = None) -> List[str]:
    """The wheel folders that hold the recorded libraries (for a child process's LD_LIBRARY_PATH)."""
    dirs: List[str] = []
    for soname in _needed():
        hit = find_in_wheels(soname, paths)
        if hit and os.path.dirname(hit) not in dirs:
            dirs.append(os.path.dirname(hit))
    return dirs


def missing_message(missing: Sequence[str]) -> str:
    """The ImportError text for libraries neither a wheel nor the system loader provided."""
    wheels = sorted({wheel_for(s) for s in missing})
    return (
        "yolocu was built with CUDA and cannot find " + ", ".join(missing) + ". Install "
        + " ".join(wheels) + " into this environment (pip install " + " ".join(wheels)
        + "; `pip install .` of a CUDA build installs them), or put the CUDA toolkit's library "
        "folder on the loader path (LD_LIBRARY_PATH)."
    )


def _needed() -> List[str]:
    try:
        from ._build_config import CUDA_SONAMES
    except ImportError:  # a build without CUDA
        return []
    return list(CUDA_SONAMES)


def preload() -> List[str]:
    """Loads each recorded library, from a wheel where one has it, else by soname. Returns the
    sonames that could be loaded neither way (the caller reports them if the extension then fails)."""
    missing: List[str] = []
    for soname in _needed():
        if soname in loaded:
            continue
        path = find_in_wheels(soname)
        try:
            ctypes.CDLL(path or soname, mode=ctypes.RTLD_GLOBAL)
            loaded[soname] = path or ""
        except OSError:
            missing.append(soname)
    return missing
