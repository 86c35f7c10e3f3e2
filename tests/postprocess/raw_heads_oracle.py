"""Raw-head oracle: ONNX Runtime on yolov5n_raw_heads.onnx and yolov5n.onnx with one npz input.

Usage: python raw_heads_oracle.py MODELS_DIR REFERENCE.npz OUT_DIR   (the project's .venv)
Writes OUT_DIR/head0.npy, head1.npy, head2.npy (raw conv outputs) and merged.npy (1x25200x85).
"""
import os
import sys

import numpy as np
import onnxruntime as ort


def main():
    models, npz, out = sys.argv[1:4]
    x = np.load(npz)["input"]
    raw = ort.InferenceSession(os.path.join(models, "yolov5n_raw_heads.onnx"),
                               providers=["CPUExecutionProvider"])
    for i, h in enumerate(raw.run(None, {raw.get_inputs()[0].name: x})):
        np.save(os.path.join(out, f"head{i}.npy"), np.ascontiguousarray(h))
    merged = ort.InferenceSession(os.path.join(models, "yolov5n.onnx"),
                                  providers=["CPUExecutionProvider"])
    y = merged.run(None, {merged.get_inputs()[0].name: x})[0]
    np.save(os.path.join(out, "merged.npy"), np.ascontiguousarray(y))


if __name__ == "__main__":
    main()
