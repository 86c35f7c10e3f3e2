"""How the package finds the CUDA libraries of a CUDA build (yolocu/_cuda_libs.py): in NVIDIA's
wheels on sys.path, else through the system loader; a clear error naming the wheel otherwise.
The end-to-end check (a new venv, the wheel installed with its dependencies, import and detect) is
scripts/check-fresh-venv.sh, which scripts/test.sh runs on the wheel it builds."""
import os

import pytest

import yolocu
from yolocu import _cuda_libs


def _touch(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").close()


def test_finds_a_library_in_any_nvidia_wheel_folder_of_the_path(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    site = tmp_path / "site"
    _touch(str(site / "nvidia" / "cu13" / "lib" / "libnvjpeg.so.13"))
    _touch(str(site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"))
    paths = [str(plain), "", str(tmp_path / "absent"), str(site)]
    assert _cuda_libs.find_in_wheels("libnvjpeg.so.13", paths) == str(site / "nvidia" / "cu13" / "lib" / "libnvjpeg.so.13")
    assert _cuda_libs.find_in_wheels("libcudnn.so.9", paths) == str(site / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9")
    assert _cuda_libs.find_in_wheels("libcudart.so.13", paths) is None


def test_the_first_path_entry_wins(tmp_path):
    for name in ("a", "b"):
        _touch(str(tmp_path / name / "nvidia" / "cu13" / "lib" / "libcudart.so.13"))
    paths = [str(tmp_path / "b"), str(tmp_path / "a")]
    assert _cuda_libs.find_in_wheels("libcudart.so.13", paths).startswith(str(tmp_path / "b"))


def test_library_dirs_lists_each_folder_once(tmp_path, monkeypatch):
    lib = tmp_path / "nvidia" / "cu13" / "lib"
    for so in ("libcudart.so.13", "libcublas.so.13"):
        _touch(str(lib / so))
    monkeypatch.setattr(_cuda_libs, "_needed", lambda: ["libcudart.so.13", "libcublas.so.13", "libcudnn.so.9"])
    assert _cuda_libs.library_dirs([str(tmp_path)]) == [str(lib)]


def test_missing_libraries_name_their_wheels():
    msg = _cuda_libs.missing_message(["libnvjpeg.so.13", "libcudnn.so.9"])
    assert "libnvjpeg.so.13" in msg and "libcudnn.so.9" in msg
    assert "nvidia-nvjpeg" in msg and "nvidia-cudnn-cu13" in msg
    assert "LD_LIBRARY_PATH" in msg
    assert _cuda_libs.wheel_for("libcublasLt.so.13") == "nvidia-cublas"
    assert _cuda_libs.wheel_for("libcudart.so.13") == "nvidia-cuda-runtime"


def test_every_recorded_library_was_loaded_at_import():
    needed = _cuda_libs._needed()
    if not yolocu.with_cuda:
        assert needed == []
        pytest.skip("a build without CUDA records no CUDA libraries")
    assert {"libcudart.so.13", "libcudnn.so.9"} <= set(needed)
    assert set(needed) <= set(_cuda_libs.loaded), f"not loaded: {set(needed) - set(_cuda_libs.loaded)}"
