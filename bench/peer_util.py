"""Shared by the PyTorch peers: import ultralytics/yolov5 v7.0 on current PyTorch; stand-ins for
modules a peer's package imports but never uses."""
import importlib.util
import os
import sys
import types
from unittest import mock


class _Stub(types.ModuleType):
    """An inert module: any attribute is a MagicMock; it has a version and a path like real ones."""
    __version__ = "0.0.0"
    __path__ = []

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        value = mock.MagicMock(name=f"{self.__name__}.{attr}")
        setattr(self, attr, value)
        return value


def stub_missing(names):
    """Inert stand-ins for the modules of `names` that are not installed (imported by the peers'
    packages at module level, never used on the timed path); returns the names stubbed."""
    stubbed = []
    for name in names:
        try:
            __import__(name)
        except ImportError:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                sub = ".".join(parts[:i])
                if sub not in sys.modules:
                    sys.modules[sub] = _Stub(sub)
                    if i > 1:
                        setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], sys.modules[sub])
            stubbed.append(name)
    return stubbed


def import_yolov5(root, yolov5_dir):
    """Applies yolocu's compatibility shims (python/yolocu_train/compat.py) and puts the v7.0 source
    tree on sys.path; returns the shim module."""
    spec = importlib.util.spec_from_file_location("yolocu_compat", os.path.join(root, "python", "yolocu_train", "compat.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.apply(log=lambda *a: None)
    sys.path.insert(0, os.path.abspath(yolov5_dir))
    mod.patch_yolov5_checks(log=lambda *x: None)
    return mod
