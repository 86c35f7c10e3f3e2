"""Shared by the PyTorch peers: import ultralytics/yolov5 v7.0 on current PyTorch."""
import importlib.util
import os
import sys


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
