"""Runs an ONNX model with ONNX Runtime (CPU) and writes every output as <out_dir>/<name>.npy.

usage: ort_run.py MODEL OUT_DIR INPUT.npy [INPUT.npy ...]   (inputs in model order)
The peer for yolocu's engine tests; single-threaded for reproducibility.
"""
import os
import sys

import numpy as np
import onnxruntime as ort


def main() -> int:
    model, out_dir, inputs = sys.argv[1], sys.argv[2], sys.argv[3:]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.load(p) for i, p in zip(sess.get_inputs(), inputs)}
    os.makedirs(out_dir, exist_ok=True)
    for meta, value in zip(sess.get_outputs(), sess.run(None, feeds)):
        np.save(os.path.join(out_dir, meta.name + ".npy"), value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
