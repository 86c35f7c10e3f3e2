"""Generates single-op ONNX models for every op YOLOv5, YOLOv8 and YOLO11 exports use, at every opset 11-18, with
random inputs and ONNX Runtime's outputs as the oracle; and small multi-node graphs with the
patterns the engines fuse (Conv+SiLU+residual Add, a Detect head with its tail), including the
variants that must not be fused.

usage: make_op_cases.py OUT_DIR [PREFIX]
PREFIX: only the cases whose name starts with it (e.g. Sppf), at every opset. Writes OUT_DIR/<case>/{model.onnx, in0.npy.., out0.npy..} and OUT_DIR/manifest.txt (one case per
line: name n_inputs n_outputs). yolocu's test_ops runs every case through its CPU engine.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def case(opset, name, op, inputs, inits, attrs=None, n_out=1, out_types=None):
    """inputs: list of (name, array) fed at run time; inits: list of (name, array) constants."""
    in_vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs]
    outs = [f"y{i}" for i in range(n_out)]
    out_vi = [onnx.ValueInfoProto(name=o) for o in outs]
    node = helper.make_node(op, [n for n, _ in inputs] + [n for n, _ in inits], outs, name=f"{op}_node",
                            **(attrs or {}))
    graph = helper.make_graph([node], name, in_vi, out_vi,
                              initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model, [a for _, a in inputs]


def graph_case(opset, name, nodes, inputs, inits, outputs):
    """nodes: (op, inputs, outputs, attrs) tuples in file order; outputs: graph output names."""
    in_vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in inputs]
    made = [helper.make_node(op, ins, outs, name=f"{op}_{k}", **(attrs or {}))
            for k, (op, ins, outs, attrs) in enumerate(nodes)]
    graph = helper.make_graph(made, name, in_vi, [onnx.ValueInfoProto(name=o) for o in outputs],
                              initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model, [a for _, a in inputs]


def conv_silu(x, w, y, k=1):
    """Conv (+ bias) -> Sigmoid -> Mul, as export.py writes SiLU."""
    return [("Conv", [x, w, w + "_b"], [y + "_c"], dict(kernel_shape=[k, k], pads=[k // 2] * 4)),
            ("Sigmoid", [y + "_c"], [y + "_s"], None), ("Mul", [y + "_c", y + "_s"], [y], None)]


def fusion_cases(opset):
    c = []
    for ch in (16, 8):  # 16: blocked layouts; 8: plain (not a multiple of the block) on AVX-512
        w = lambda name, k=1: [(name, f32(ch, ch, k, k) * 0.3), (name + "_b", f32(ch))]
        x = f32(1, ch, 10, 12)
        # the Bottleneck shortcut: x + SiLU(conv(SiLU(conv(x)))), x the graph input -> fused Add
        nodes = conv_silu("x", "wa", "t") + conv_silu("t", "wb", "u", 3) + [("Add", ["x", "u"], ["y"], None)]
        c.append((f"FuseResidual{ch}", graph_case(opset, "res", nodes, [("x", x)], w("wa") + w("wb", 3), ["y"])))
        # an addend produced after the convolution (file order): that convolution must not take
        # the Add; the later, plain convolution may (its other addend exists by then)
        nodes = (conv_silu("x", "wa", "t") + conv_silu("t", "wb", "u", 3) +
                 [("Conv", ["t", "wc", "wc_b"], ["v"], dict(kernel_shape=[1, 1])), ("Add", ["u", "v"], ["y"], None)])
        c.append((f"FuseResidualLate{ch}", graph_case(opset, "late", nodes, [("x", x)], w("wa") + w("wb", 3) + w("wc"), ["y"])))
        # the activated output also feeds another op: no fusion
        nodes = conv_silu("x", "wa", "u") + [("Add", ["x", "u"], ["y"], None), ("Mul", ["u", "u"], ["z"], None)]
        c.append((f"FuseResidualShared{ch}", graph_case(opset, "shared", nodes, [("x", x)], w("wa"), ["y", "z"])))
    # Mixed layouts on AVX-512: x (24 channels, plain) added to a convolution whose input is
    # blocked (32 channels) and whose 24-channel output is therefore padded-blocked
    x = f32(1, 24, 10, 12)
    nodes = conv_silu("x", "wa", "t") + conv_silu("t", "wb", "u", 3) + [("Add", ["x", "u"], ["y"], None)]
    inits = [("wa", f32(32, 24, 1, 1) * 0.3), ("wa_b", f32(32)), ("wb", f32(24, 32, 3, 3) * 0.3), ("wb_b", f32(24))]
    c.append(("FuseResidualMixed", graph_case(opset, "mixed", nodes, [("x", x)], inits, ["y"])))
    # Channel Concats of blocked values written in place (one image; not when an input repeats,
    # is a graph output, or the batch is 2); nested Concats chain
    w16 = lambda name, cin=16, cout=16, k=1: [(name, f32(cout, cin, k, k) * 0.3), (name + "_b", f32(cout))]
    trunk = conv_silu("x", "wa", "t") + conv_silu("t", "wb", "u", 3) + [
        ("MaxPool", ["u"], ["m"], dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]))]
    head = [("Conv", ["y", "wc", "wc_b"], ["z"], dict(kernel_shape=[1, 1]))]
    inits = w16("wa") + w16("wb", k=3) + w16("wc", cin=48)
    for name, cat, batch, outs in [("FuseConcat", [("Concat", ["t", "u", "m"], ["y"], dict(axis=1))], 1, ["z"]),
                                   ("FuseConcatRepeated", [("Concat", ["t", "u", "t"], ["y"], dict(axis=1))], 1, ["z"]),
                                   ("FuseConcatOutput", [("Concat", ["t", "u", "m"], ["y"], dict(axis=1))], 1, ["z", "t"]),
                                   ("FuseConcatBatch2", [("Concat", ["t", "u", "m"], ["y"], dict(axis=1))], 2, ["z"]),
                                   ("FuseConcatNested", [("Concat", ["t", "u"], ["y1"], dict(axis=1)),
                                                         ("Concat", ["y1", "m"], ["y"], dict(axis=1))], 1, ["z"])]:
        c.append((name, graph_case(opset, name.lower(), trunk + cat + head, [("x", f32(batch, 16, 8, 10))], inits, outs)))
    # A Detect head as export.py writes it: 2 levels, 3 anchors, 2 classes (no = 7), strides 8 / 16;
    # at batch 2 and at batch 1 (the GPU engine's parity test runs its form at batch 1: its second
    # level becomes a constant there, and a batch of 2 behind a batch-1 input is refused)
    for name, batch in [("FuseDetectHead", 2), ("FuseDetectHeadBatch1", 1)]:
        c.append((name, detect_head_case(opset, batch)))
    c += sppf_cases(opset)
    c += maxpool_blocked_cases(opset)
    return c


def detect_head_case(opset, batch):
    """YOLOv5's Detect head as export.py writes it (2 levels, 3 anchors, 2 classes: no = 7)."""
    na, nc = 3, 2
    no = nc + 5
    inputs = [("p3", f32(batch, 16, 6, 8)), ("p4", f32(batch, 16, 3, 4))]
    inits, nodes, merged = [], [], []
    for i, (name, a) in enumerate(inputs):
        ny, nx = a.shape[2], a.shape[3]
        stride = float(8 << i)
        xv, yv = np.meshgrid(np.arange(nx, dtype=np.float32), np.arange(ny, dtype=np.float32))
        grid = np.broadcast_to(np.stack((xv, yv), 2)[None, None], (1, na, ny, nx, 2)) - np.float32(0.5)
        anchors = rng.uniform(5, 300, (na, 2)).astype(np.float32)
        anchor_grid = np.broadcast_to(anchors.reshape(1, na, 1, 1, 2), (1, na, ny, nx, 2)).copy()
        p = f"l{i}_"
        inits += [(p + "w", f32(na * no, 16, 1, 1) * 0.5), (p + "b", f32(na * no)),
                  (p + "shape5", np.array([batch, na, no, ny, nx], np.int64)), (p + "two", np.array(2, np.float32)),
                  (p + "grid", grid.astype(np.float32)), (p + "stride", np.array(stride, np.float32)),
                  (p + "two_b", np.array(2, np.float32)), (p + "pow", np.array(2, np.float32)),
                  (p + "anchor", anchor_grid), (p + "shape3", np.array([batch, na * ny * nx, no], np.int64))]
        split = [2, 2, no - 4]
        if opset >= 13:
            inits.append((p + "split", np.array(split, np.int64)))
            split_node = ("Split", [p + "sig", p + "split"], [p + "xy", p + "wh", p + "conf"], dict(axis=4))
        else:
            split_node = ("Split", [p + "sig"], [p + "xy", p + "wh", p + "conf"], dict(axis=4, split=split))
        nodes += [("Conv", [name, p + "w", p + "b"], [p + "conv"], dict(kernel_shape=[1, 1])),
                  ("Reshape", [p + "conv", p + "shape5"], [p + "r5"], None),
                  ("Transpose", [p + "r5"], [p + "t"], dict(perm=[0, 1, 3, 4, 2])),
                  ("Sigmoid", [p + "t"], [p + "sig"], None), split_node,
                  ("Mul", [p + "xy", p + "two"], [p + "xy2"], None), ("Add", [p + "xy2", p + "grid"], [p + "xyg"], None),
                  ("Mul", [p + "xyg", p + "stride"], [p + "xyo"], None),
                  ("Mul", [p + "wh", p + "two_b"], [p + "wh2"], None), ("Pow", [p + "wh2", p + "pow"], [p + "whp"], None),
                  ("Mul", [p + "whp", p + "anchor"], [p + "who"], None),
                  ("Concat", [p + "xyo", p + "who", p + "conf"], [p + "cat"], dict(axis=4)),
                  ("Reshape", [p + "cat", p + "shape3"], [p + "rows"], None)]
        merged.append(p + "rows")
    nodes.append(("Concat", merged, ["output0"], dict(axis=1)))
    return graph_case(opset, f"detect{batch}", nodes, inputs, inits, ["output0"])


# SPPF as YOLOv5 / v8 export it (cv1 -> three chained stride-1 max pools -> Concat with their input
# -> cv2), and the variants the GPU engine must not take for it (GpuSteps.SppfPatterns): another
# kernel size in the chain, a pool read by one more op, the Concat's inputs in another order, a pool
# that is also a graph output. Expected fused SPPF blocks: test_gpu_steps.cpp.
def sppf_cases(opset):
    # their own random numbers: the other cases keep the inputs they had before these were added
    own = np.random.default_rng(1000 + opset)
    r = lambda *shape: own.standard_normal(shape).astype(np.float32)
    c = []
    ch = 8
    inits = [("w1", r(ch, ch, 1, 1) * 0.3), ("w1_b", r(ch)), ("w2", r(ch, 4 * ch, 1, 1) * 0.3), ("w2_b", r(ch))]
    x = [("x", r(1, ch, 9, 11))]

    def pool(src, dst, k=5):
        return ("MaxPool", [src], [dst], dict(kernel_shape=[k, k], pads=[k // 2] * 4, strides=[1, 1]))

    def sppf(k=(5, 5, 5), order=("t", "p1", "p2", "p3"), extra=(), outputs=("y",)):
        nodes = conv_silu("x", "w1", "t") + [pool("t", "p1", k[0]), pool("p1", "p2", k[1]), pool("p2", "p3", k[2]),
                                              ("Concat", list(order), ["cat"], dict(axis=1))]
        nodes += conv_silu("cat", "w2", "y") + list(extra)
        return graph_case(opset, "sppf", nodes, x, inits, list(outputs))

    c.append(("SppfExact", sppf()))
    c.append(("SppfKernel3", sppf(k=(3, 3, 3))))
    c.append(("SppfMixedKernels", sppf(k=(5, 3, 5))))
    c.append(("SppfExtraReader", sppf(extra=[("Relu", ["p2"], ["r"], None)], outputs=("y", "r"))))
    c.append(("SppfOrder", sppf(order=("t", "p2", "p1", "p3"))))
    c.append(("SppfPoolIsOutput", sppf(outputs=("y", "p3"))))
    return c


def maxpool_blocked_cases(opset):
    """MaxPool on a convolution's output, which the CPU engine keeps blocked (16 channels; 8 on a
    machine of 8-channel blocks) and pools separably: strides, an even kernel, asymmetric pads."""
    own = np.random.default_rng(2000 + opset)
    r = lambda *shape: own.standard_normal(shape).astype(np.float32)
    c = []
    for ch in (16, 8):
        inits = [("wa", r(ch, ch, 1, 1) * 0.3), ("wa_b", r(ch))]
        x = [("x", r(1, ch, 10, 13))]
        for name, attrs in (("K3S2", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
                            ("K2S2", dict(kernel_shape=[2, 2], strides=[2, 2])),
                            ("K3Asym", dict(kernel_shape=[3, 3], pads=[0, 1, 2, 0])),
                            ("K5S1", dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2])),
                            ("K3x5S2x1", dict(kernel_shape=[3, 5], strides=[2, 1], pads=[1, 2, 1, 2]))):
            nodes = conv_silu("x", "wa", "t") + [("MaxPool", ["t"], ["y"], attrs)]
            c.append((f"MaxPoolBlocked{name}_{ch}", graph_case(opset, "pool", nodes, x, inits, ["y"])))
    return c


def cases(opset):
    c = []
    x = f32(2, 8, 10, 12)
    c.append(("Conv", case(opset, "conv", "Conv", [("x", x)], [("w", f32(16, 8, 3, 3)), ("b", f32(16))],
                           dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]))))
    c.append(("ConvGroup", case(opset, "convg", "Conv", [("x", x)], [("w", f32(8, 2, 1, 1))],
                                dict(kernel_shape=[1, 1], group=4))))
    c.append(("Conv6x6", case(opset, "conv6", "Conv", [("x", f32(1, 3, 32, 32))], [("w", f32(16, 3, 6, 6)), ("b", f32(16))],
                              dict(kernel_shape=[6, 6], pads=[2, 2, 2, 2], strides=[2, 2]))))
    for op in ["Sigmoid", "Floor", "Identity", "Relu"]:
        c.append((op, case(opset, op, op, [("x", x * 3)], [])))
    for op in ["Add", "Sub", "Mul", "Div"]:
        c.append((op, case(opset, op, op, [("a", x), ("b", f32(1, 8, 1, 12))], [])))
        c.append((op + "Scalar", case(opset, op, op, [("a", x)], [("b", np.array(2.5, np.float32))])))
    c.append(("Pow", case(opset, "pow", "Pow", [("a", np.abs(x))], [("b", np.array(2.0, np.float32))])))
    c.append(("Equal", case(opset, "eq", "Equal", [("a", np.array([1, 2, 3, 4], np.int64))],
                            [("b", np.array([1, 0, 3, 0], np.int64))])))
    c.append(("Concat", case(opset, "concat", "Concat", [("a", x), ("b", f32(2, 4, 10, 12))], [], dict(axis=1))))
    c.append(("ConcatNeg", case(opset, "concatn", "Concat", [("a", f32(1, 3, 5)), ("b", f32(1, 3, 7))], [], dict(axis=-1))))
    c.append(("MaxPool", case(opset, "mp", "MaxPool", [("x", x)], [], dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2], strides=[1, 1]))))
    c.append(("MaxPool2", case(opset, "mp2", "MaxPool", [("x", x)], [], dict(kernel_shape=[2, 2], strides=[2, 2]))))
    scales = np.array([1, 1, 2, 2], np.float32)
    m = case(opset, "resize", "Resize", [("x", x)], [("roi", np.array([], np.float32)), ("scales", scales)],
             dict(mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    c.append(("Resize", m))
    m = case(opset, "resize_sizes", "Resize", [("x", x)], [("roi", np.array([], np.float32)), ("scales", np.array([], np.float32)),
                                                          ("sizes", np.array([2, 8, 20, 24], np.int64))],
             dict(mode="nearest"))
    c.append(("ResizeSizes", m))
    c.append(("Reshape", case(opset, "reshape", "Reshape", [("x", x)], [("s", np.array([2, 4, -1, 0], np.int64))])))
    c.append(("Transpose", case(opset, "tr", "Transpose", [("x", f32(1, 3, 5, 4, 6))], [], dict(perm=[0, 1, 3, 4, 2]))))
    if opset >= 13:
        c.append(("Split", case(opset, "split", "Split", [("x", f32(1, 3, 4, 85))], [("s", np.array([2, 2, 81], np.int64))],
                                dict(axis=-1), n_out=3)))
        c.append(("Unsqueeze", case(opset, "unsq", "Unsqueeze", [("x", x)], [("a", np.array([0, -1], np.int64))])))
        c.append(("Squeeze", case(opset, "sq", "Squeeze", [("x", f32(1, 3, 1, 4))], [("a", np.array([2], np.int64))])))
    else:
        c.append(("Split", case(opset, "split", "Split", [("x", f32(1, 3, 4, 85))], [], dict(axis=-1, split=[2, 2, 81]), n_out=3)))
        c.append(("Unsqueeze", case(opset, "unsq", "Unsqueeze", [("x", x)], [], dict(axes=[0, -1]))))
        c.append(("Squeeze", case(opset, "sq", "Squeeze", [("x", f32(1, 3, 1, 4))], [], dict(axes=[2]))))
    c.append(("SplitEqual", case(opset, "splite", "Split", [("x", f32(2, 6, 3))], [],
                                 dict(axis=1, num_outputs=3) if opset >= 18 else dict(axis=1), n_out=3)))
    sl = [("st", np.array([1, 0], np.int64)), ("en", np.array([3, 100], np.int64)), ("ax", np.array([1, 3], np.int64)),
          ("sp", np.array([1, 2], np.int64))]
    c.append(("Slice", case(opset, "slice", "Slice", [("x", x)], sl)))
    sl2 = [("st", np.array([-1], np.int64)), ("en", np.array([-100], np.int64)), ("ax", np.array([2], np.int64)),
           ("sp", np.array([-2], np.int64))]
    c.append(("SliceNeg", case(opset, "slicen", "Slice", [("x", x)], sl2)))
    c.append(("Gather", case(opset, "gather", "Gather", [("x", x)], [("i", np.array([3, -1, 0], np.int64))], dict(axis=2))))
    c.append(("GatherScalar", case(opset, "gathers", "Gather", [("x", np.array([4, 3, 80, 80], np.int64))],
                                   [("i", np.array(2, np.int64))], dict(axis=0))))
    c.append(("Shape", case(opset, "shape", "Shape", [("x", x)], [])))
    c.append(("Range", case(opset, "range", "Range", [], [("s", np.array(0, np.int64)), ("l", np.array(20, np.int64)),
                                                          ("d", np.array(3, np.int64))])))
    c.append(("RangeF", case(opset, "rangef", "Range", [], [("s", np.array(0.5, np.float32)), ("l", np.array(8, np.float32)),
                                                           ("d", np.array(1.5, np.float32))])))
    c.append(("Expand", case(opset, "expand", "Expand", [("x", f32(1, 3, 1, 1, 2))], [("s", np.array([1, 3, 4, 5, 2], np.int64))])))
    c.append(("ConstantOfShape", case(opset, "cos", "ConstantOfShape", [], [("s", np.array([2, 3], np.int64))],
                                      dict(value=numpy_helper.from_array(np.array([7], np.int64))))))
    c.append(("Where", case(opset, "where", "Where", [("c", rng.random((3, 4)) > 0.5), ("a", f32(3, 4))], [("b", f32(1, 4))])))
    c.append(("Cast", case(opset, "cast", "Cast", [("x", x * 10)], [], dict(to=TensorProto.INT64))))
    c.append(("CastF16", case(opset, "casth", "Cast", [("x", x)], [], dict(to=TensorProto.FLOAT16))))
    c.append(("Constant", case(opset, "const", "Constant", [], [], dict(value=numpy_helper.from_array(f32(2, 3))))))
    # YOLOv8 / YOLO11: the DFL softmax (axis 1 of [b, 16, 4, anchors]) and C2PSA's attention
    c.append(("Softmax", case(opset, "softmax", "Softmax", [("x", x * 3)], [])))  # default axis: 1 (< 13), -1
    c.append(("SoftmaxAxis1", case(opset, "softmax1", "Softmax", [("x", f32(2, 16, 4, 50) * 4)], [], dict(axis=1))))
    c.append(("SoftmaxNeg", case(opset, "softmaxn", "Softmax", [("x", x * 3)], [], dict(axis=-2))))
    c.append(("MatMul", case(opset, "matmul", "MatMul", [("a", f32(2, 2, 16, 20)), ("b", f32(2, 2, 20, 12))], [])))
    c.append(("MatMulBcast", case(opset, "matmulb", "MatMul", [("a", f32(2, 1, 3, 4))], [("b", f32(3, 4, 5))])))
    c.append(("MatMulVec", case(opset, "matmulv", "MatMul", [("a", f32(7))], [("b", f32(2, 7, 3))])))
    c.extend(quant_cases(opset))
    c.extend(layout_cases(opset))
    return c


def quant_cases(opset):
    """QuantizeLinear / DequantizeLinear (already quantised exports): per tensor from opset 11, per
    axis from 13, and a QDQ convolution whose weights' DequantizeLinear folds at build time."""
    x = f32(2, 8, 6, 7) * 3
    q8 = rng.integers(-128, 128, (2, 8, 6, 7)).astype(np.int8)
    u8 = rng.integers(0, 256, (2, 8, 6, 7)).astype(np.uint8)
    s = np.array(0.05, np.float32)
    c = [("QuantizeLinear", case(opset, "q", "QuantizeLinear", [("x", x)], [("s", s), ("z", np.array(3, np.int8))])),
         ("QuantizeLinearU8", case(opset, "qu", "QuantizeLinear", [("x", x)], [("s", s)])),
         ("DequantizeLinear", case(opset, "dq", "DequantizeLinear", [("x", q8)], [("s", s), ("z", np.array(-2, np.int8))])),
         ("DequantizeLinearU8", case(opset, "dqu", "DequantizeLinear", [("x", u8)], [("s", s), ("z", np.array(128, np.uint8))]))]
    if opset >= 13:
        sa = (rng.random(8) * 0.1 + 0.01).astype(np.float32)
        c.append(("QuantizeLinearAxis", case(opset, "qa", "QuantizeLinear", [("x", x)],
                                             [("s", sa), ("z", rng.integers(-5, 5, 8).astype(np.int8))], dict(axis=1))))
        c.append(("DequantizeLinearAxis", case(opset, "dqa", "DequantizeLinear", [("x", q8)],
                                               [("s", sa), ("z", np.zeros(8, np.int8))], dict(axis=1))))
        w = rng.integers(-127, 128, (16, 8, 3, 3)).astype(np.int8)
        ws = (rng.random(16) * 0.02 + 0.005).astype(np.float32)
        nodes = [("QuantizeLinear", ["x", "xs", "xz"], ["xq"], {}), ("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], {}),
                 ("DequantizeLinear", ["w", "ws", "wz"], ["wd"], dict(axis=0)),
                 ("Conv", ["xd", "wd", "b"], ["y"], dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]))]
        c.append(("QdqConv", graph_case(opset, "qdqconv", nodes, [("x", x)],
                                        [("xs", s), ("xz", np.array(0, np.int8)), ("w", w), ("ws", ws),
                                         ("wz", np.zeros(16, np.int8)), ("b", f32(16))], ["y"])))
    return c


def layout_cases(opset):
    """Graphs whose layouts the CPU engine picks: a channel Split of a convolution's (blocked) output
    feeding convolutions and a Concat (C2f / C3k2), with parts of 16 and of 8 channels (padded
    blocked on AVX-512), and a convolution reading a plain activation (after a Transpose)."""
    c = []
    for part in (16, 8):
        ch = 2 * part
        split = ([("Split", ["y1", "sp"], ["a", "b"], dict(axis=1))] if opset >= 13 else
                 [("Split", ["y1"], ["a", "b"], dict(axis=1, split=[part, part]))])
        nodes = conv_silu("x", "w1", "y1") + split + conv_silu("b", "w2", "m1", k=3) + conv_silu("m1", "w3", "m2", k=3) + [
            ("Concat", ["a", "b", "m2"], ["cat"], dict(axis=1))] + conv_silu("cat", "w4", "out")
        inits = [("w1", f32(ch, 16, 1, 1) * 0.3), ("w1_b", f32(ch)), ("w2", f32(part, part, 3, 3) * 0.2), ("w2_b", f32(part)),
                 ("w3", f32(part, part, 3, 3) * 0.2), ("w3_b", f32(part)), ("w4", f32(16, 3 * part, 1, 1) * 0.3),
                 ("w4_b", f32(16))]
        if opset >= 13:
            inits.append(("sp", np.array([part, part], np.int64)))
        c.append((f"SplitConv{part}", graph_case(opset, f"splitconv{part}", nodes, [("x", f32(1, 16, 12, 10))], inits,
                                                  ["out"])))
    nodes = [("Transpose", ["x"], ["t"], dict(perm=[0, 2, 1, 3]))] + conv_silu("t", "w", "out", k=3)
    c.append(("ConvAfterTranspose", graph_case(opset, "convtr", nodes, [("x", f32(1, 6, 16, 9))],
                                               [("w", f32(16, 16, 3, 3) * 0.2), ("w_b", f32(16))], ["out"])))
    return c


def main() -> int:
    out = sys.argv[1]
    prefix = sys.argv[2] if len(sys.argv) > 2 else ""
    os.makedirs(out, exist_ok=True)
    lines = []
    for opset in range(11, 19):
        for name, (model, feeds) in cases(opset) + fusion_cases(opset):
            if not name.startswith(prefix):
                continue
            # Shape-inferred output types for the value infos (ORT needs them defined).
            model = onnx.shape_inference.infer_shapes(model)
            d = os.path.join(out, f"{name}_op{opset}")
            os.makedirs(d, exist_ok=True)
            onnx.save(model, os.path.join(d, "model.onnx"))
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            sess = ort.InferenceSession(os.path.join(d, "model.onnx"), so, providers=["CPUExecutionProvider"])
            ins = [vi for vi in model.graph.input if vi.name not in {n.name for n in model.graph.initializer}]
            feed = {vi.name: a for vi, a in zip(ins, feeds)}
            outs = sess.run(None, feed)
            for k, vi in enumerate(ins):
                np.save(os.path.join(d, f"in{k}.npy"), feed[vi.name])
            for k, v in enumerate(outs):
                np.save(os.path.join(d, f"out{k}.npy"), v)
            lines.append(f"{name}_op{opset} {len(ins)} {len(outs)}")
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines)} op cases written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
