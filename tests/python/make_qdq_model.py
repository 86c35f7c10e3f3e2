"""Quantises an ONNX export with ONNX Runtime's static quantisation in QDQ format (int8 activations
and per-channel int8 weights, MinMax calibration on a few images), then runs the QDQ model with ONNX
Runtime (graph optimisations off: every Q / DQ node as written) on one more image: yolocu's CPU
engine must give the same outputs (tests/engine/test_qdq_model.cpp).

usage: make_qdq_model.py MODEL.onnx IMAGES_DIR OUT_DIR [N_CALIBRATION [symmetric|symmetric-conv]]
Writes OUT_DIR/{model_qdq.onnx, input.npy, output.npy, output_float.npy (the float model's)}.
`symmetric`: activations quantised symmetrically too (zero points 0, as QAT flows export them;
ONNX Runtime's default gives them zero points); `symmetric-conv`: the same, and only the
convolutions quantised (their inputs and weights: yolocu's own INT8 scheme).
"""
import os
import sys

import numpy as np
import onnx
import onnx.version_converter
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static


def load(path, size):
    """A JPEG as the network input, stretched to size x size (RGB, [0, 1], NCHW): enough for the
    activations' ranges; the test compares two executions of one graph, not detections."""
    from PIL import Image
    im = Image.open(path).convert("RGB").resize((size, size))
    return (np.asarray(im, np.float32) / 255.0).transpose(2, 0, 1)[None].copy()


class Reader(CalibrationDataReader):
    def __init__(self, name, arrays):
        self.it = iter([{name: a} for a in arrays])

    def get_next(self):
        return next(self.it, None)


def main() -> int:
    model, images, out = sys.argv[1], sys.argv[2], sys.argv[3]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    mode = sys.argv[5] if len(sys.argv) > 5 else ""
    extra = {"ActivationSymmetric": True, "WeightSymmetric": True} if mode.startswith("symmetric") else {}
    ops = ["Conv"] if mode == "symmetric-conv" else None
    if ops:  # the convolutions' inputs alone, not their outputs
        extra["OpTypesToExcludeOutputQuantization"] = ops
    os.makedirs(out, exist_ok=True)
    m = onnx.load(model)
    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    if opset < 13:  # per-channel Q / DQ (their axis attribute) needs opset 13
        m = onnx.version_converter.convert_version(m, 13)
        model = os.path.join(out, "model_op13.onnx")
        onnx.save(m, model)
    inp = m.graph.input[0]
    size = inp.type.tensor_type.shape.dim[2].dim_value or 640
    files = sorted(f for f in os.listdir(images) if f.endswith(".jpg"))[: n + 1]
    arrays = [load(os.path.join(images, f), size) for f in files]
    qdq = os.path.join(out, "model_qdq.onnx")
    quantize_static(model, qdq, Reader(inp.name, arrays[:n]), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, per_channel=True,
                    op_types_to_quantize=ops, extra_options=extra)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(qdq, so, providers=["CPUExecutionProvider"])
    y = sess.run(None, {inp.name: arrays[n]})[0]
    fp = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, {inp.name: arrays[n]})[0]
    np.save(os.path.join(out, "input.npy"), arrays[n])
    np.save(os.path.join(out, "output.npy"), y)
    np.save(os.path.join(out, "output_float.npy"), fp)  # the float model: what quantisation changes
    q = sum(1 for nd in onnx.load(qdq).graph.node if nd.op_type in ("QuantizeLinear", "DequantizeLinear"))
    print(f"{qdq}: {q} Q / DQ nodes; ONNX Runtime output {y.shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
