#!/usr/bin/env python3
"""Correctness of torch.ops.yolocu against PyTorch (GPU machine; also runs on CPU for the CPU kernels).

Prints one PASS/FAIL line per check and exits nonzero on any failure.

    python tests/training/test_torch_ops.py [--device cuda] [--yolov5 .data/yolov5]

Tolerances (stated per check): upsample forward bit-identical to F.interpolate for every dtype,
backward bit-identical expected and accepted within 1 ulp (fp32 2e-7, fp16 1e-3, bf16 8e-3 rel.;
the line says bwd_bitwise=True/False); CIoU float64 forward to rtol 1e-12 and gradients to rtol
1e-9 of PyTorch autograd of bbox_iou, plus gradcheck (alpha frozen, see check_ciou_gradcheck);
float32 forward to 5e-7 abs (~2 ulp; fwd_bitwise is reported), float32 gradients to rtol 1e-4 /
atol 1e-6; under AMP (fp16 logits) loss rtol 1e-6, fp16 logit gradients rtol 1e-3 / atol 1e-7;
EMA bit-identical to ultralytics' loop; SGD to rtol 1e-5 / atol 1e-6 of torch.optim.SGD after 6
steps (bit_identical is reported).
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))
import yolocu_train as yt  # noqa: E402

ops = torch.ops.yolocu
FAILURES = []


def check(name, ok, detail=""):
    print(f"{'PASS' if ok else 'FAIL'}  {name}  {detail}")
    if not ok:
        FAILURES.append(name)


# ---- reference bbox_iou (CIoU, xywh), the same op sequence as ultralytics' -------------------------
def bbox_ciou_reference(box1, box2, eps=1e-7):
    x1, y1, w1, h1 = box1.chunk(4, -1)
    x2, y2, w2, h2 = box2.chunk(4, -1)
    w1_, h1_, w2_, h2_ = w1 / 2, h1 / 2, w2 / 2, h2 / 2
    b1x1, b1x2, b1y1, b1y2 = x1 - w1_, x1 + w1_, y1 - h1_, y1 + h1_
    b2x1, b2x2, b2y1, b2y2 = x2 - w2_, x2 + w2_, y2 - h2_, y2 + h2_
    inter = (torch.min(b1x2, b2x2) - torch.max(b1x1, b2x1)).clamp(0) * \
            (torch.min(b1y2, b2y2) - torch.max(b1y1, b2y1)).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = torch.max(b1x2, b2x2) - torch.min(b1x1, b2x1)
    ch = torch.max(b1y2, b2y2) - torch.min(b1y1, b2y1)
    c2 = cw ** 2 + ch ** 2 + eps
    rho2 = ((b2x1 + b2x2 - b1x1 - b1x2) ** 2 + (b2y1 + b2y2 - b1y1 - b1y2) ** 2) / 4
    v = (4 / math.pi ** 2) * torch.pow(torch.atan(w2 / h2) - torch.atan(w1 / h1), 2)
    with torch.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return iou - (rho2 / c2 + v * alpha)


def make_boxes(n, dtype, device, seed):
    g = torch.Generator().manual_seed(seed)
    p = torch.cat([torch.rand(n, 2, generator=g) * 4, torch.rand(n, 2, generator=g) * 2.8 + 0.2], 1)
    t = torch.cat([torch.rand(n, 2, generator=g) * 4, torch.rand(n, 2, generator=g) * 2.8 + 0.2], 1)
    # Edge cases: identical (all ties), contained, disjoint, touching, same centre, shared edge.
    special = torch.tensor([[5, 5, 2, 4, 5, 5, 2, 4], [0, 0, 2, 2, 0, 0, 4, 4], [0, 0, 4, 4, 0, 0, 2, 2],
                            [0, 0, 2, 2, 10, 0, 2, 2], [0, 0, 2, 2, 2, 0, 2, 2], [1, 1, 2, 3, 1, 1, 3, 2],
                            [1, 1, 2, 2, 1.5, 1, 3, 2], [0, 0, 1, 1, 0, 3, 1, 1]], dtype=torch.float64)
    k = min(n, len(special))
    p[:k] = special[:k, :4].float()
    t[:k] = special[:k, 4:].float()
    return p.to(device, dtype), t.to(device, dtype)


# ---- upsample -----------------------------------------------------------------------------------------
def check_upsample(device):
    shapes = [(16, 32, 80, 80), (2, 256, 20, 20), (2, 128, 40, 40), (2, 3, 5, 7), (1, 4, 3, 24), (3, 24, 4, 6)]
    dtypes = [torch.float32, torch.float16, torch.bfloat16, torch.float64] if device == "cuda" else \
        [torch.float32, torch.float64]  # CPU torch may lack half upsample
    for shape in shapes:
        for dtype in dtypes:
            for cl in (False, True):
                x = torch.randn(shape, device=device).to(dtype)
                if cl:
                    x = x.to(memory_format=torch.channels_last)
                xa = x.detach().requires_grad_()
                xb = x.detach().requires_grad_()
                ya = ops.upsample_nearest2x(xa)
                yb = F.interpolate(xb, scale_factor=2, mode="nearest")
                g = torch.randn_like(yb)
                ya.backward(g)
                yb.backward(g)
                fwd_ok = torch.equal(ya, yb)  # values; the memory format is reported, not required
                fmt = "cl" if ya.is_contiguous(memory_format=torch.channels_last) else "nchw"
                tfmt = "cl" if yb.is_contiguous(memory_format=torch.channels_last) else "nchw"
                # Bit-identical expected (same fp32 summation order); accepted within 1 ulp of the
                # dtype (a different order of the 4-term sum) and reported as bitwise=False.
                tol = {torch.float32: 2e-7, torch.float64: 1e-15, torch.float16: 1e-3, torch.bfloat16: 8e-3}[dtype]
                bitwise = torch.equal(xa.grad, xb.grad)
                bwd_ok = bitwise or torch.allclose(xa.grad.double(), xb.grad.double(), rtol=tol, atol=tol)
                diff = (xa.grad.double() - xb.grad.double()).abs().max().item()
                check(f"upsample {tuple(shape)} {str(dtype)[6:]} {'channels_last' if cl else 'nchw'}",
                      fwd_ok and bwd_ok, f"fwd_equal={fwd_ok} bwd_bitwise={bitwise} bwd_maxdiff={diff:.3g} out_format={fmt} torch={tfmt}")
    # Non-dense input (a slice) goes through .contiguous() and still matches.
    x = torch.randn(2, 8, 10, 12, device=device)[:, ::2]
    check("upsample non-dense input", torch.equal(ops.upsample_nearest2x(x), F.interpolate(x, scale_factor=2)))
    for cl in (False, True):
        x = torch.randn(2, 3, 4, 5, device=device, dtype=torch.float64)
        if cl:
            x = x.to(memory_format=torch.channels_last)
        ok = torch.autograd.gradcheck(ops.upsample_nearest2x, (x.requires_grad_(),), eps=1e-6, atol=1e-5, rtol=1e-3)
        check(f"upsample gradcheck float64 {'channels_last' if cl else 'nchw'}", ok)


# ---- CIoU ------------------------------------------------------------------------------------------------
def ciou_reference_grads(p, t, g):
    pr = p.detach().clone().requires_grad_()
    out = bbox_ciou_reference(pr, t).squeeze(-1)
    out.backward(g)
    return out.detach(), pr.grad


def check_ciou(device, yolov5_bbox_iou):
    levels = [4000, 0, 9000, 7000]
    for dtype in (torch.float64, torch.float32):
        ps, ts, gs = [], [], []
        for i, n in enumerate(levels):
            p, t = make_boxes(n, dtype, device, seed=10 + i)
            ps.append(p.requires_grad_())
            ts.append(t)
            gs.append(torch.randn(n, device=device, dtype=dtype))
        outs = ops.ciou(ps, ts, 1e-7)
        torch.autograd.backward([o for o in outs], gs)
        for i, (p, t, g, o) in enumerate(zip(ps, ts, gs, outs)):
            ref_out, ref_grad = ciou_reference_grads(p, t, g)
            if dtype == torch.float64:
                fok = torch.allclose(o, ref_out, rtol=1e-12, atol=1e-14)
                gok = torch.allclose(p.grad, ref_grad, rtol=1e-9, atol=1e-12)
            else:
                fok = (o - ref_out).abs().max().item() <= 5e-7 if o.numel() else True  # <= ~2 ulp
                gok = torch.allclose(p.grad, ref_grad, rtol=1e-4, atol=1e-6)
            fd = (o.double() - ref_out.double()).abs().max().item() if o.numel() else 0.0
            gd = (p.grad.double() - ref_grad.double()).abs().max().item() if o.numel() else 0.0
            check(f"ciou level {i} n={levels[i]} {str(dtype)[6:]} vs autograd(bbox_iou)", fok and gok,
                  f"fwd_maxdiff={fd:.3g} grad_maxdiff={gd:.3g} fwd_bitwise={torch.equal(o, ref_out)}")
        if yolov5_bbox_iou is not None:
            p, t = ps[2].detach().clone().requires_grad_(), ts[2]
            ref = yolov5_bbox_iou(p, t, CIoU=True).squeeze(-1)
            ref.backward(gs[2])
            ok = torch.allclose(outs[2], ref, rtol=1e-12 if dtype == torch.float64 else 0, atol=5e-7) and \
                torch.allclose(ps[2].grad, p.grad, rtol=1e-9 if dtype == torch.float64 else 1e-4,
                               atol=1e-12 if dtype == torch.float64 else 1e-6)
            check(f"ciou {str(dtype)[6:]} vs ultralytics v7.0 utils.metrics.bbox_iou", ok)
    # Hand cases, exact values (float64).
    p, t = make_boxes(8, torch.float64, device, 0)
    o = ops.ciou([p], [t], 1e-7)[0].cpu()
    expect = torch.tensor([8 / (8 + 1e-7), 4 / (16 + 1e-7), 4 / (16 + 1e-7), -100 / (148 + 1e-7), -4 / (20 + 1e-7)],
                          dtype=torch.float64)
    check("ciou hand cases (identical, contained x2, disjoint, touching)", torch.allclose(o[:5], expect, rtol=1e-14))


def check_ciou_gradcheck(device):
    """gradcheck of G(p) = ciou(p) + v(p) * (alpha(p) - alpha0).detach(): numerically G is the CIoU with
    alpha frozen at alpha0 = alpha(p0) (what ultralytics differentiates), and analytically its gradient
    at p0 is exactly our op's gradient. Boxes away from ties and from touching edges (kinks)."""
    p, t = make_boxes(64, torch.float64, device, 5)
    p, t = p[8:], t[8:]
    iw = torch.min(p[:, 0] + p[:, 2] / 2, t[:, 0] + t[:, 2] / 2) - torch.max(p[:, 0] - p[:, 2] / 2, t[:, 0] - t[:, 2] / 2)
    ih = torch.min(p[:, 1] + p[:, 3] / 2, t[:, 1] + t[:, 3] / 2) - torch.max(p[:, 1] - p[:, 3] / 2, t[:, 1] - t[:, 3] / 2)
    keep = (iw.abs() > 1e-3) & (ih.abs() > 1e-3)
    p, t = p[keep].contiguous(), t[keep].contiguous()

    def v_alpha(pb):
        iou_raw = bbox_ciou_reference  # noqa: F841 (documentation: same formulas)
        x1, y1, w1, h1 = pb.unbind(-1)
        x2, y2, w2, h2 = t.unbind(-1)
        v = (4 / math.pi ** 2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)) ** 2
        iw_ = (torch.min(x1 + w1 / 2, x2 + w2 / 2) - torch.max(x1 - w1 / 2, x2 - w2 / 2)).clamp(0)
        ih_ = (torch.min(y1 + h1 / 2, y2 + h2 / 2) - torch.max(y1 - h1 / 2, y2 - h2 / 2)).clamp(0)
        inter = iw_ * ih_
        iou = inter / (w1 * h1 + w2 * h2 - inter + 1e-7)
        return v, v / (v - iou + (1 + 1e-7))

    alpha0 = v_alpha(p)[1].detach()

    def G(pb):
        v, a = v_alpha(pb)
        return ops.ciou([pb], [t], 1e-7)[0] + v * (a - alpha0).detach()

    ok = torch.autograd.gradcheck(G, (p.clone().requires_grad_(),), eps=1e-6, atol=1e-5, rtol=1e-3)
    check(f"ciou gradcheck float64 (alpha frozen), {p.shape[0]} boxes", ok)


def check_ciou_amp(device):
    """YOLOv5's AMP path: fp16 logits -> decoded fp32 pbox -> CIoU; gradients on the fp16 logits."""
    if device != "cuda":
        return
    g = torch.Generator().manual_seed(3)
    logits = (torch.randn(5000, 4, generator=g) * 0.5).to(device, torch.float16)
    anchors = (torch.rand(5000, 2, generator=g) * 3 + 0.5).to(device)
    tbox = torch.cat([torch.rand(5000, 2, generator=g) * 1.5 - 0.25, torch.rand(5000, 2, generator=g) * 3 + 0.5],
                     1).to(device)
    res = []
    for fused in (True, False):
        lg = logits.clone().requires_grad_()
        with torch.autocast("cuda", dtype=torch.float16):
            pxy = lg[:, :2].sigmoid() * 2 - 0.5
            pwh = (lg[:, 2:].sigmoid() * 2) ** 2 * anchors
            pbox = torch.cat((pxy, pwh), 1)
            iou = ops.ciou([pbox], [tbox], 1e-7)[0] if fused else bbox_ciou_reference(pbox, tbox).squeeze()
            loss = (1.0 - iou).mean()
        loss.backward()
        res.append((pbox.dtype, loss.detach(), lg.grad))
    ok = res[0][0] == torch.float32 and torch.allclose(res[0][1], res[1][1], rtol=1e-6) and \
        torch.allclose(res[0][2].float(), res[1][2].float(), rtol=1e-3, atol=1e-7)
    check("ciou under autocast (fp16 logits, fp32 pbox) vs bbox_iou", ok,
          f"pbox dtype={res[0][0]} loss {res[0][1].item():.7f} vs {res[1][1].item():.7f} "
          f"max fp16 grad diff={(res[0][2].float() - res[1][2].float()).abs().max().item():.3g}")


# ---- EMA / SGD ----------------------------------------------------------------------------------------
def yolov5s_like_tensors(device, seed):
    import json
    with open(os.path.join(REPO, "bench", "training", "yolov5s_shapes.json")) as f:
        shapes = json.load(f)
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g).to(device) for _, s in shapes["state"]], shapes


def check_ema(device):
    model, _ = yolov5s_like_tensors(device, 1)
    ema = [m + 0.1 * torch.randn_like(m) for m in model]
    ref = [e.clone() for e in ema]
    for updates in range(1, 4):
        d = 0.9999 * (1 - math.exp(-updates / 2000))
        yt.ema_update_(ema, model, d)
        for v, m in zip(ref, model):  # ultralytics ModelEMA.update
            v *= d
            v += (1 - d) * m
        for m in model:
            m.add_(0.01)  # the model moves between updates
    ok = all(torch.equal(a, b) for a, b in zip(ema, ref))
    diff = max((a - b).abs().max().item() for a, b in zip(ema, ref))
    check(f"ema yolov5s ({len(ema)} tensors) x3 vs ultralytics loop, bit-identical", ok, f"maxdiff={diff:.3g}")


def check_sgd(device):
    _, shapes = yolov5s_like_tensors(device, 0)
    g = torch.Generator().manual_seed(2)
    groups_shapes = shapes["groups"]
    base = [[torch.randn(s, generator=g).to(device) for s in grp] for grp in groups_shapes]
    runs = {}
    for kind in ("fused", "torch"):
        params = [[torch.nn.Parameter(t.clone()) for t in grp] for grp in base]
        hp = dict(lr=0.01, momentum=0.937, nesterov=True)
        if kind == "fused":
            opt = yt.FusedSGD(params[2], **hp)
        else:
            opt = torch.optim.SGD(params[2], **hp, foreach=True)
        opt.add_param_group({"params": params[0], "weight_decay": 5e-4})
        opt.add_param_group({"params": params[1], "weight_decay": 0.0})
        gg = torch.Generator().manual_seed(7)
        scaler = torch.amp.GradScaler(device, enabled=device == "cuda", init_scale=2.0 ** 10)
        for step in range(6):
            for j, pg in enumerate(opt.param_groups):  # yolov5 warm-up: lr and momentum change every step
                pg["lr"] = (0.1 if j == 0 else 0.0) + 0.002 * step
                pg["momentum"] = 0.8 + 0.02 * step
            for grp in params:
                for p in grp:
                    p.grad = (torch.randn(p.shape, generator=gg) * 1024).to(device)
            if step == 3:
                params[0][0].grad[0] = float("inf")  # GradScaler skips this step
            scaler.scale(torch.ones((), device=device))  # initialises the scaler's state, as scaling a loss does
            scaler.unscale_(opt)
            scaler.step(opt)
            scaler.update()
        runs[kind] = [p.detach() for grp in params for p in grp] + \
            [opt.state[p]["momentum_buffer"] for grp in params for p in grp]
    ok = all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(runs["fused"], runs["torch"]))
    diff = max((a - b).abs().max().item() for a, b in zip(runs["fused"], runs["torch"]))
    exact = all(torch.equal(a, b) for a, b in zip(runs["fused"], runs["torch"]))
    check("sgd 3 groups nesterov, 6 warm-up steps with a skipped (inf) step vs torch.optim.SGD(foreach)", ok,
          f"maxdiff={diff:.3g} bit_identical={exact}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--yolov5", default=os.path.join(REPO, ".data", "yolov5"))
    args = ap.parse_args()
    print(f"torch {torch.__version__}, device {args.device}"
          f"{' ' + torch.cuda.get_device_name(0) if args.device == 'cuda' else ''}, library {yt.LIBRARY_PATH}")
    if args.device == "cuda":
        check("extension built with CUDA kernels", yt.HAVE_CUDA_KERNELS, f"library {yt.LIBRARY_PATH}")
        if not yt.HAVE_CUDA_KERNELS:
            sys.exit(1)
    yolov5_bbox_iou = None
    if os.path.isdir(os.path.join(args.yolov5, "utils")):
        # Import only utils/metrics.py's bbox_iou (its module imports need matplotlib: use the compat stubs).
        from yolocu_train import compat
        compat.apply(log=lambda s: None)
        sys.path.insert(0, args.yolov5)
        try:
            from utils.metrics import bbox_iou as yolov5_bbox_iou
        except Exception as e:  # noqa: BLE001
            print(f"note: ultralytics bbox_iou not importable ({e}); using the reference only")
    torch.manual_seed(0)
    check_upsample(args.device)
    check_ciou(args.device, yolov5_bbox_iou)
    check_ciou_gradcheck(args.device)
    check_ciou_amp(args.device)
    check_ema(args.device)
    if args.device == "cuda":
        check_sgd(args.device)
    print(f"\n{'ALL PASSED' if not FAILURES else f'{len(FAILURES)} FAILED: ' + ', '.join(FAILURES)}")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
