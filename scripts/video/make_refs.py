#!/usr/bin/env python3
"""Test material for the video tests, made at test time and never committed.

    /usr/bin/python3 scripts/video/make_refs.py OUT_DIR [--data DIR] [--yolov5 DIR]

Writes into OUT_DIR (skipped when OUT_DIR/COMPLETE matches this script and its inputs):
  clip_h264.mp4      coco128 images 0..9, each held 3 frames, 640x480 letterboxed by ffmpeg's scale+pad,
                     25 fps, H.264 (libx264, yuv420p, +faststart): a parity clip
  clip_h265.mkv      the same frames, HEVC (libx265, yuv420p): a parity clip
  clip_mjpeg.avi     the same frames, MJPEG (yuvj420p): a parity clip
  clip_vp9.webm, clip_av1.mkv, clip_mpeg4.mov
                     the first 12 frames in the other codecs / containers (decode parity only)
  clip_h264_360.mp4  640x360 H.264 (coded height 368: the crop of OpenCV's coded-size conversion)
  clip_size_change.h264
                     raw H.264 whose frame size changes mid-way: 6 frames at 640x480, then 10 at
                     320x240 (two encodes, concatenated; no cv2 frames): the NVDEC decoders' size change
  frames_<clip>.npy  every frame of each clip as cv2.VideoCapture(clip).read() returns it (N x H x W x 3)
  refs_<clip>.json   parity clips: per frame, ultralytics/yolov5 v7.0's detections on that cv2 frame:
                     detect.py's path for a 640x640 export (letterbox auto=False, yolov5n.pt fused FP32
                     on PyTorch-CPU, non_max_suppression(0.25, 0.45, max_det=1000), scale_boxes),
                     rows [x1, y1, x2, y2, conf, cls]
  COMPLETE           written last

Needs: the `ffmpeg` tool, python3-opencv, python3-torch (Debian), models/yolov5n.pt and coco128 from
the data folder, and an unmodified ultralytics/yolov5 v7.0 source tree (git-ignored .data/yolov5: see
bench/peer_torch_cpu.py for how to get it). The model is loaded as bench/peer_torch_cpu.py loads it.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
IMAGES, HOLD, FPS = 10, 3, 25
SHORT = 12  # frames of the other-codec clips
CLIPS = {  # name: (ffmpeg output options, frames, size)
    "clip_h264.mp4": (["-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart"], None, (640, 480)),
    "clip_mjpeg.avi": (["-c:v", "mjpeg", "-pix_fmt", "yuvj420p", "-q:v", "3"], None, (640, 480)),
    "clip_h265.mkv": (["-c:v", "libx265", "-pix_fmt", "yuv420p", "-x265-params", "log-level=error"], None, (640, 480)),
    "clip_vp9.webm": (["-c:v", "libvpx-vp9", "-pix_fmt", "yuv420p", "-deadline", "realtime", "-cpu-used", "8"], SHORT, (640, 480)),
    "clip_av1.mkv": (["-c:v", "libaom-av1", "-pix_fmt", "yuv420p", "-cpu-used", "8", "-row-mt", "1"], SHORT, (640, 480)),
    "clip_mpeg4.mov": (["-c:v", "mpeg4", "-q:v", "3"], SHORT, (640, 480)),
    "clip_h264_360.mp4": (["-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart"], SHORT, (640, 360)),
}
PARITY = ["clip_h264.mp4", "clip_h265.mkv", "clip_mjpeg.avi"]


def stub_missing(names):
    from unittest import mock
    for name in names:
        try:
            __import__(name)
        except ImportError:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                sys.modules.setdefault(".".join(parts[:i]), mock.MagicMock(name=".".join(parts[:i])))


def fingerprint(paths):
    h = hashlib.sha256()
    for p in paths:
        h.update(p.encode())
        with open(p, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def make_clip(name, seq_dir, out_dir, opts, frames, size):
    w, h = size
    vf = f"scale={w}:{h}:force_original_aspect_ratio=decrease,pad={w}:{h}:(ow-iw)/2:(oh-ih)/2,setsar=1"
    cmd = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-framerate", str(FPS),
           "-i", os.path.join(seq_dir, "%04d.jpg"), "-vf", vf]
    if frames:
        cmd += ["-frames:v", str(frames)]
    cmd += opts + [os.path.join(out_dir, name)]
    subprocess.run(cmd, check=True)


def make_size_change_clip(seq_dir, out_dir):
    """clip_size_change.h264: 6 frames at 640x480, then the next 10 at 320x240, each part its own
    encode (a new sequence at an IDR picture, B-frames before it), concatenated as raw H.264."""
    parts = []
    for k, (start, frames, size) in enumerate([(1, 6, (640, 480)), (7, 10, (320, 240))]):
        part = os.path.join(out_dir, f"size_change_{k}.h264")
        w, h = size
        vf = f"scale={w}:{h}:force_original_aspect_ratio=decrease,pad={w}:{h}:(ow-iw)/2:(oh-ih)/2,setsar=1"
        subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-framerate", str(FPS),
                        "-start_number", str(start), "-i", os.path.join(seq_dir, "%04d.jpg"), "-vf", vf,
                        "-frames:v", str(frames), "-c:v", "libx264", "-pix_fmt", "yuv420p", "-f", "h264", part],
                       check=True)
        parts.append(part)
    with open(os.path.join(out_dir, "clip_size_change.h264"), "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                out.write(f.read())
            os.remove(part)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--data", default=os.environ.get("YOLOCU_DATA_DIR", os.path.join(ROOT, "..", "shared", "data")))
    ap.add_argument("--yolov5", default=os.path.join(ROOT, ".data", "yolov5"))
    ap.add_argument("--no-detections", metavar="REASON", default="",
                    help="make the clips and their cv2 frames only (no ultralytics/yolov5 v7.0 tree here): the "
                         "detection-parity tests then skip, saying REASON (written to DETECTIONS_UNAVAILABLE)")
    a = ap.parse_args()
    images_dir = os.path.join(a.data, "coco128", "images", "train2017")
    weights = os.path.join(a.data, "models", "yolov5n.pt")
    images = sorted(f for f in os.listdir(images_dir) if f.endswith(".jpg"))[:IMAGES]
    inputs = [os.path.abspath(__file__), weights] + [os.path.join(images_dir, f) for f in images]
    stamp = fingerprint(inputs) + (" no-detections" if a.no_detections else "")
    os.makedirs(a.out, exist_ok=True)
    complete = os.path.join(a.out, "COMPLETE")
    if os.path.exists(complete) and open(complete).read().strip() == stamp:
        print(f"[video refs] up to date: {a.out}")
        return
    if os.path.exists(complete):
        os.remove(complete)
    unavailable = os.path.join(a.out, "DETECTIONS_UNAVAILABLE")
    if os.path.exists(unavailable):
        os.remove(unavailable)
    if not a.no_detections and not os.path.isdir(os.path.join(a.yolov5, "utils")):
        sys.exit(f"[video refs] no ultralytics/yolov5 v7.0 source at {a.yolov5} (see bench/peer_torch_cpu.py)")

    import cv2
    import numpy as np

    seq = os.path.join(a.out, "seq")
    os.makedirs(seq, exist_ok=True)
    n = 0
    for f in images:  # each image held HOLD frames: links 0001.jpg, 0002.jpg, ...
        for _ in range(HOLD):
            n += 1
            link = os.path.join(seq, f"{n:04d}.jpg")
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(os.path.join(images_dir, f), link)
    make_size_change_clip(seq, a.out)
    for name, (opts, frames, size) in CLIPS.items():
        make_clip(name, seq, a.out, opts, frames, size)
        cap = cv2.VideoCapture(os.path.join(a.out, name))
        got = []
        while True:
            ok, im = cap.read()
            if not ok:
                break
            got.append(im)
        cap.release()
        want = frames or n
        if len(got) != want:
            sys.exit(f"[video refs] {name}: cv2.VideoCapture read {len(got)} frames, expected {want}")
        np.save(os.path.join(a.out, f"frames_{name}.npy"), np.stack(got))
        print(f"[video refs] {name}: {len(got)} frames {got[0].shape[1]}x{got[0].shape[0]}")

    if a.no_detections:
        for name in PARITY:
            stale = os.path.join(a.out, f"refs_{name}.json")
            if os.path.exists(stale):
                os.remove(stale)
        with open(unavailable, "w") as f:
            f.write(a.no_detections + "\n")
        with open(complete, "w") as f:
            f.write(stamp + "\n")
        print(f"[video refs] clips and frames only (no detections: {a.no_detections}): {a.out}")
        return

    stub_missing(["pandas", "IPython", "IPython.display", "matplotlib", "matplotlib.pyplot", "seaborn", "scipy",
                  "scipy.signal", "tqdm", "thop"])
    sys.path.insert(0, a.yolov5)
    import torch
    from models.experimental import attempt_load
    from utils.augmentations import letterbox
    from utils.general import non_max_suppression, scale_boxes

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    model = attempt_load(weights, device=torch.device("cpu"), fuse=True).float().eval()
    for name in PARITY:
        frames = np.load(os.path.join(a.out, f"frames_{name}.npy"))
        refs = []
        for im0 in frames:
            im = letterbox(im0, (640, 640), stride=32, auto=False)[0]
            im = np.ascontiguousarray(im.transpose((2, 0, 1))[::-1])
            x = torch.from_numpy(im).float()[None] / 255
            with torch.no_grad():
                pred = model(x)[0]
            det = non_max_suppression(pred, 0.25, 0.45, None, False, max_det=1000)[0]
            det[:, :4] = scale_boxes(x.shape[2:], det[:, :4], im0.shape)
            refs.append([[float(v) for v in row] for row in det.tolist()])
        with open(os.path.join(a.out, f"refs_{name}.json"), "w") as f:
            json.dump({"clip": name, "conf": 0.25, "iou": 0.45, "max_det": 1000, "frames": refs}, f)
        print(f"[video refs] {name}: ultralytics v7.0 detections on {len(refs)} frames "
              f"({sum(len(r) for r in refs)} boxes)")
    with open(complete, "w") as f:
        f.write(stamp + "\n")


if __name__ == "__main__":
    main()
