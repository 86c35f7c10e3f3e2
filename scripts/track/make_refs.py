"""Generated detection sequences and ultralytics' tracker outputs on them (scripts/track/make_refs.sh).

Writes into --out, for each sequence <name>:
  <name>.dets           the per-frame detections fed to both trackers:
                        `frame <f> <n> [<6 numbers: the camera warp>]` then n lines `x1 y1 x2 y2 conf cls`
  <name>.<tracker>.out  ultralytics' output per frame: `frame <f> <n>` then n lines
                        `x1 y1 x2 y2 track_id score cls idx` (its N x 8 array, float32 printed exactly)
  bytetrack.yaml, botsort.yaml   ultralytics' own tracker files as used (botsort: gmc_method none)
  bytetrack_tuned.yaml  bytetrack.yaml with other values (no score fusion, stricter thresholds,
                        a short buffer), run by BYTETracker: the settings' other branches
  sequences.txt         `<name> <kind> <seed> <frames>` per sequence
  pan_video_<seed>/     rendered grey frames (NNNN.png) of a camera panning over a texture, with
                        .dets and .botsort_sof.out beside them: BOTSORT as shipped (gmc_method
                        sparseOptFlow) on those frames; video_sequences.txt lists them
BoT-SORT runs with gmc_method none; on the camera-pan sequences its GMC step is fed the true warp
of the generated camera (the yolocu library takes the warp from the caller likewise), so the
parity covers the motion compensation of the Kalman states but not the flow estimation.
"""

import argparse
import os
import shutil

import numpy as np

W, H = 1280, 720


class Obj:
    def __init__(self, rng, x=None, y=None, vx=None, vy=None, w=None, h=None):
        self.w = w if w is not None else rng.uniform(30, 140)
        self.h = h if h is not None else self.w * rng.uniform(1.2, 2.8)
        self.x = x if x is not None else rng.uniform(100, W - 100)
        self.y = y if y is not None else rng.uniform(100, H - 100)
        self.vx = vx if vx is not None else rng.uniform(-6, 6)
        self.vy = vy if vy is not None else rng.uniform(-3, 3)
        self.cls = float(rng.integers(0, 3))
        self.hidden_until = -1

    def step(self, rng, jitter=0.3):
        self.vx += rng.normal(0, jitter)
        self.vy += rng.normal(0, jitter * 0.5)
        self.x += self.vx
        self.y += self.vy

    def box(self):
        return np.array([self.x - self.w / 2, self.y - self.h / 2, self.x + self.w / 2, self.y + self.h / 2])


def iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def detect(rng, box, cls, conf=None, noise=1.5):
    b = box + rng.normal(0, noise, 4)
    c = conf if conf is not None else rng.uniform(0.3, 0.95)
    return [b[0], b[1], b[2], b[3], c, cls]


def in_view(box):
    return box[2] > 0 and box[0] < W and box[3] > 0 and box[1] < H


def clip(box):
    return np.array([max(box[0], 0), max(box[1], 0), min(box[2], W), min(box[3], H)])


def make_sequence(kind, seed, frames, truth=None):
    """Returns per-frame detection lists and per-frame warps (None: no camera motion); appends each
    frame's true (box, grey level) list to `truth` when given."""
    rng = np.random.default_rng(seed)
    objs = []
    if kind == "crossing":  # pairs walking through each other, horizontally and diagonally
        for k in range(4):
            y = 150 + 140 * k + rng.uniform(-20, 20)
            objs.append(Obj(rng, x=150, y=y, vx=rng.uniform(4, 8), vy=rng.uniform(-0.5, 0.5)))
            objs.append(Obj(rng, x=W - 150, y=y + rng.uniform(-30, 30), vx=-rng.uniform(4, 8), vy=rng.uniform(-0.5, 0.5)))
    elif kind == "dense":  # a crowd: many boxes overlapping each other, noisier detections
        objs = [Obj(rng, x=rng.uniform(300, 980), y=rng.uniform(200, 520), w=rng.uniform(30, 70)) for _ in range(22)]
    else:
        objs = [Obj(rng) for _ in range(int(rng.integers(6, 12)))]
    dets_all, warps = [], []
    cam = np.zeros(2)
    cam_v = rng.uniform(-8, 8, 2) * np.array([1, 0.4])
    for f in range(frames):
        warp = None
        if kind == "pan":  # the camera moves: every object shifts by the same (accelerating) translation
            cam_v += rng.normal(0, 0.8, 2) * np.array([1, 0.4])
            angle, scale = rng.normal(0, 0.002), 1 + rng.normal(0, 0.002)
            c, s = scale * np.cos(angle), scale * np.sin(angle)
            warp = np.array([[c, -s, -cam_v[0]], [s, c, -cam_v[1]]])
            for o in objs:
                p = warp[:, :2] @ np.array([o.x, o.y]) + warp[:, 2]
                o.x, o.y = p
                o.w *= scale
                o.h *= scale
        for o in objs:
            o.step(rng, jitter=0.15 if kind == "crossing" else 0.3)
        if kind in ("leave_reenter", "pan"):  # objects that left come back after a while (some beyond track_buffer)
            for o in objs:
                if not in_view(o.box()) and o.hidden_until < 0:
                    o.hidden_until = f + int(rng.integers(3, 45))
                if o.hidden_until >= 0 and f >= o.hidden_until:
                    o.hidden_until = -1
                    side = rng.integers(0, 2)
                    o.x = 20.0 if side == 0 else W - 20.0
                    o.y = rng.uniform(150, H - 150)
                    o.vx = abs(o.vx) if side == 0 else -abs(o.vx)
        else:  # bounce at the borders: objects stay in view
            lo_x, hi_x, lo_y, hi_y = (300, 980, 200, 520) if kind == "dense" else (60, W - 60, 80, H - 80)
            for o in objs:
                if o.x < lo_x or o.x > hi_x:
                    o.vx = -o.vx
                if o.y < lo_y or o.y > hi_y:
                    o.vy = -o.vy
        dets = []
        boxes = [o.box() for o in objs]
        if truth is not None:
            truth.append([(b, 40 + (37 * i) % 180) for i, b in enumerate(boxes)])
        for i, o in enumerate(objs):
            b = boxes[i]
            if not in_view(b) or o.hidden_until >= 0:
                continue
            b = clip(b)
            if b[2] - b[0] < 4 or b[3] - b[1] < 4:
                continue
            occluded = any(j != i and iou(b, boxes[j]) > 0.25 and objs[j].y > o.y for j in range(len(objs)))
            if kind == "occlusion" and occluded:  # the one behind: mostly missed, else a weak score
                if rng.random() < 0.6:
                    continue
                dets.append(detect(rng, b, o.cls, conf=rng.uniform(0.12, 0.3)))
                continue
            miss = {"missed": 0.25}.get(kind, 0.04)
            if rng.random() < miss:
                continue
            low = {"missed": 0.2}.get(kind, 0.08)
            conf = rng.uniform(0.11, 0.25) if rng.random() < low else None
            dets.append(detect(rng, b, o.cls, conf=conf, noise=3.0 if kind == "dense" else 1.5))
        if kind == "missed":  # clutter: short-lived false positives, mostly weak
            for _ in range(int(rng.poisson(1.0))):
                o = Obj(rng)
                dets.append(detect(rng, o.box(), o.cls, conf=rng.uniform(0.1, 0.5)))
        order = rng.permutation(len(dets))  # detector output order carries no identity
        dets_all.append([dets[k] for k in order])
        warps.append(warp)
    return dets_all, warps


def render_frames(warps, truth, out_dir, seed):
    """Grey frames of a camera moving over a textured world by `warps`, with the objects drawn on top."""
    import cv2

    rng = np.random.default_rng(seed)
    tex_w, tex_h, origin = 4000, 3000, np.array([1400.0, 1100.0])
    texture = rng.integers(0, 256, (tex_h // 4, tex_w // 4), dtype=np.uint8)
    texture = cv2.GaussianBlur(cv2.resize(texture, (tex_w, tex_h), interpolation=cv2.INTER_CUBIC), (0, 0), 2.0)
    cam = np.vstack([np.hstack([np.eye(2), -origin[:, None]]), [0, 0, 1]])  # texture px -> frame px
    os.makedirs(out_dir, exist_ok=True)
    for f, (warp, objs) in enumerate(zip(warps, truth), 1):
        cam = np.vstack([warp, [0, 0, 1]]) @ cam
        frame = cv2.warpAffine(texture, cam[:2], (W, H), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
        for b, grey in objs:
            x1, y1, x2, y2 = (int(round(v)) for v in b)
            cv2.rectangle(frame, (x1, y1), (x2, y2), int(grey), thickness=-1)
        cv2.imwrite(os.path.join(out_dir, f"{f:04d}.png"), frame)


def fmt(v):
    return repr(float(np.float32(v)))


def run_tracker(tracker, dets_all, warps, use_gmc):
    from ultralytics.engine.results import Boxes

    current = {"warp": np.eye(2, 3)}
    if use_gmc:  # the true camera warp instead of the flow estimate (see the module docstring)
        tracker.gmc.method = "given"
        tracker.gmc.apply = lambda img, dets: current["warp"].copy()
    img = np.zeros((8, 8, 3), np.uint8)
    outs = []
    for dets, warp in zip(dets_all, warps):
        data = np.asarray(dets, dtype=np.float32).reshape(-1, 6)
        current["warp"] = warp if warp is not None else np.eye(2, 3)
        out = tracker.update(Boxes(data, (H, W)), img if use_gmc else None)
        outs.append(np.asarray(out, dtype=np.float32).reshape(-1, 8))
    return outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--video-frames", type=int, default=60)
    args = ap.parse_args()
    from types import SimpleNamespace

    import ultralytics
    import yaml
    from ultralytics.trackers.bot_sort import BOTSORT
    from ultralytics.engine.results import Boxes
    from ultralytics.trackers.byte_tracker import BYTETracker

    cfg_dir = os.path.join(os.path.dirname(ultralytics.__file__), "cfg", "trackers")
    shutil.copy(os.path.join(cfg_dir, "bytetrack.yaml"), os.path.join(args.out, "bytetrack.yaml"))
    text = open(os.path.join(cfg_dir, "botsort.yaml")).read()
    text = text.replace("gmc_method: sparseOptFlow", "gmc_method: none")
    open(os.path.join(args.out, "botsort.yaml"), "w").write(text)
    tuned = open(os.path.join(cfg_dir, "bytetrack.yaml")).read()
    for old, new in (("track_high_thresh: 0.25", "track_high_thresh: 0.5"), ("new_track_thresh: 0.25", "new_track_thresh: 0.6"),
                     ("track_buffer: 30", "track_buffer: 8"), ("match_thresh: 0.8", "match_thresh: 0.6"),
                     ("fuse_score: True", "fuse_score: False")):
        assert old in tuned, old
        tuned = tuned.replace(old, new)
    open(os.path.join(args.out, "bytetrack_tuned.yaml"), "w").write(tuned)
    tracker_names = ("bytetrack", "botsort", "bytetrack_tuned")
    cfgs = {t: SimpleNamespace(**yaml.safe_load(open(os.path.join(args.out, t + ".yaml")))) for t in tracker_names}

    kinds = ["crossing", "occlusion", "leave_reenter", "missed", "pan", "random", "dense"]
    listing = []
    for kind in kinds:
        for seed in range(3):
            name = f"{kind}_{seed}"
            dets_all, warps = make_sequence(kind, 1000 * kinds.index(kind) + seed, args.frames)
            with open(os.path.join(args.out, name + ".dets"), "w") as fh:
                for f, (dets, warp) in enumerate(zip(dets_all, warps), 1):
                    extra = "" if warp is None else " " + " ".join(repr(float(v)) for v in warp.reshape(-1))
                    fh.write(f"frame {f} {len(dets)}{extra}\n")
                    for d in dets:
                        fh.write(" ".join(fmt(v) for v in d) + "\n")
            for tname in tracker_names:
                tracker = BOTSORT(cfgs[tname]) if tname == "botsort" else BYTETracker(cfgs[tname])
                outs = run_tracker(tracker, dets_all, warps, use_gmc=(tname == "botsort" and kind == "pan"))
                with open(os.path.join(args.out, f"{name}.{tname}.out"), "w") as fh:
                    for f, out in enumerate(outs, 1):
                        fh.write(f"frame {f} {len(out)}\n")
                        for row in out:
                            fh.write(" ".join(fmt(v) for v in row) + "\n")
            listing.append(f"{name} {kind} {seed} {args.frames}")
            print(f"[track refs] {name}: {sum(len(d) for d in dets_all)} detections")
    # BoT-SORT as shipped (gmc_method: sparseOptFlow) on rendered frames of a moving camera: the
    # warp comes from ultralytics' GMC on its side, from the test's OpenCV calls on ours
    shutil.copy(os.path.join(cfg_dir, "botsort.yaml"), os.path.join(args.out, "botsort_sof.yaml"))
    sof = SimpleNamespace(**yaml.safe_load(open(os.path.join(args.out, "botsort_sof.yaml"))))
    assert sof.gmc_method == "sparseOptFlow"
    import cv2

    video = []
    for seed in range(2):
        name, truth = f"pan_video_{seed}", []
        dets_all, warps = make_sequence("pan", 7000 + seed, args.video_frames, truth)
        render_frames(warps, truth, os.path.join(args.out, name), 7100 + seed)
        with open(os.path.join(args.out, name + ".dets"), "w") as fh:
            for f, dets in enumerate(dets_all, 1):
                fh.write(f"frame {f} {len(dets)}\n")
                for d in dets:
                    fh.write(" ".join(fmt(v) for v in d) + "\n")
        tracker = BOTSORT(sof)
        with open(os.path.join(args.out, name + ".botsort_sof.out"), "w") as fh:
            for f, dets in enumerate(dets_all, 1):
                grey = cv2.imread(os.path.join(args.out, name, f"{f:04d}.png"), cv2.IMREAD_GRAYSCALE)
                data = np.asarray(dets, dtype=np.float32).reshape(-1, 6)
                out = np.asarray(tracker.update(Boxes(data, (H, W)), cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR)), np.float32)
                out = out.reshape(-1, 8)
                fh.write(f"frame {f} {len(out)}\n")
                for row in out:
                    fh.write(" ".join(fmt(v) for v in row) + "\n")
        video.append(f"{name} pan_video {seed} {args.video_frames}")
        print(f"[track refs] {name}: {sum(len(d) for d in dets_all)} detections, frames rendered")
    with open(os.path.join(args.out, "video_sequences.txt"), "w") as fh:
        fh.write("\n".join(video) + "\n")
    with open(os.path.join(args.out, "sequences.txt"), "w") as fh:
        fh.write("\n".join(listing) + "\n")
    open(os.path.join(args.out, "COMPLETE"), "w").write(f"ultralytics {ultralytics.__version__}\n")


if __name__ == "__main__":
    main()
