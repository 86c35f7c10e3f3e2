#!/usr/bin/env python3
"""Peer of bench_video_decode: cv2.VideoCapture(FILE).read() over every frame (FFmpeg + swscale to
BGR, the frames yolocu's CPU decoder reproduces byte for byte). Prints frames/s, median of --runs.

    /usr/bin/python3 bench/peer_cv2_decode.py FILE [--threads N] [--runs 3]

--threads sets OPENCV_FFMPEG_THREADS (libavcodec threads; OpenCV's default is the number of CPUs).
"""
import argparse
import os
import statistics
import time

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("file")
ap.add_argument("--threads", type=int, default=0)
ap.add_argument("--runs", type=int, default=3)
a = ap.parse_args()
if a.threads:
    os.environ["OPENCV_FFMPEG_THREADS"] = str(a.threads)
import cv2  # noqa: E402  (after the environment variable)

fps = []
for _ in range(a.runs):
    cap = cv2.VideoCapture(a.file)
    n, t0 = 0, time.perf_counter()
    while cap.read()[0]:
        n += 1
    fps.append(n / (time.perf_counter() - t0))
    cap.release()
print(f"{a.file}: cv2 {cv2.__version__} VideoCapture.read(), threads {a.threads or 'default'}: {n} frames per pass, "
      f"{statistics.median(fps):.1f} frames/s (median of {a.runs}; min {min(fps):.1f}, max {max(fps):.1f})")
