"""bench/merge_profiles.py on a small profile and peer table: rows matched by model, batch and
convolution shape (the stem by its ONNX shape), sums and ratios; a profile without the conv column
matches nothing (exit 1)."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "merge_profiles.py")

BENCH = """\
yolov5s_random_fp16.onnx       1     12124 ...
  per-layer profile, yolov5s_random_fp16.onnx batch 1 (eager, events around each step; sum 0.690 ms, convolutions 0.583 ms):
  | # | layer | kind | tactic | conv | us | % | TFLOP/s | GB/s | % roofline |
  |---|---|---|---|---|---|---|---|---|---|
  | 1 | /model.0/conv/Conv | Conv | cudnn-graph eng7_k24=26 (space-to-depth stem) | 3->32 6x6 s2 640x640 | 20.0 | 3 | 1 | 1 | 1 |
  | 2 | DetectTail | DetectTail | - | - | 19.0 | 2.8 | 0.0 | 677 | 20 |
  | 3 | /model.1/conv/Conv | Conv | cudnn-graph eng4_k24=26 | 32->64 3x3 s2 320x320 | 10.0 | 1 | 1 | 1 | 1 |
  | 4 | /model.9/cv1/conv/Conv | Conv | cudnn-graph eng4_k24=2 | 512->256 1x1 s1 20x20 | 5.0 | 1 | 1 | 1 | 1 |
  per-layer profile, yolov5s_random_fp16.onnx batch 32 (eager, events around each step; sum 3.358 ms, convolutions 2.662 ms):
  | # | layer | kind | tactic | conv | us | % | TFLOP/s | GB/s | % roofline |
  | 1 | /model.0/conv/Conv | Conv | cudnn-graph eng7_k24=26 (space-to-depth stem) | 3->32 6x6 s2 640x640 | 440.0 | 3 | 1 | 1 | 1 |
"""

PEER = """\
| model | batch | PyTorch median ms | p90 ms | images/s |
| yolov5s | 1 | 1.022 | 1.024 | 978 |

| model | batch | Conv+SiLU (cin->cout k s input) | uses | PyTorch us per use |
|---|---|---|---|---|
| yolov5s | 1 | 3->32 6x6 s2 640x640 | 1 | 40.0 |
| yolov5s | 1 | 32->64 3x3 s2 320x320 | 1 | 15.0 |
| yolov5s | 32 | 3->32 6x6 s2 640x640 | 1 | 979.9 |
| yolov5n | 1 | 3->16 6x6 s2 640x640 | 1 | 30.0 |
"""


def run(bench, peer, *extra):
    with tempfile.TemporaryDirectory() as d:
        b, p = os.path.join(d, "b.log"), os.path.join(d, "p.log")
        open(b, "w").write(bench)
        open(p, "w").write(peer)
        r = subprocess.run([sys.executable, SCRIPT, b, p, *extra], capture_output=True, text=True)
        return r.returncode, r.stdout, r.stderr


def main():
    rc, out, err = run(BENCH, PEER)
    assert rc == 0, err
    assert "yolov5s batch 1: 2 of 3 convolutions matched; yolocu 30.0 us, PyTorch 55.0 us (1.83x)" in out, out
    assert "| /model.0/conv/Conv | 3->32 6x6 s2 640x640 | cudnn-graph eng7_k24=26 (space-to-depth stem) | 20.0 | 40.0 | 2.00x |" in out, out
    assert "| /model.1/conv/Conv | 32->64 3x3 s2 320x320 | cudnn-graph eng4_k24=26 | 10.0 | 15.0 | 1.50x |" in out, out
    assert "yolov5s batch 32: 1 of 1 convolutions matched; yolocu 440.0 us, PyTorch 979.9 us (2.23x)" in out, out
    assert out.index("/model.0/conv/Conv") < out.index("/model.1/conv/Conv"), "slowest first"
    assert "yolov5n" not in out, "no profile of yolov5n: nothing to print"
    # the table with bench_cuda_engine's 'chain' column (the graph's longest chain) matches the same
    chained = BENCH.replace("% roofline |", "% roofline | chain |").replace("|---|---|---|\n", "|---|---|---|---|\n")
    chained = "\n".join(l + " yes |" if l.startswith("  | ") and "Conv |" in l else l for l in chained.split("\n"))
    rc, out2, err = run(chained, PEER)
    assert rc == 0 and out2 == out, (out2, err)
    rc, out, _ = run(BENCH, PEER, "--top", "1")
    assert rc == 0 and "/model.1/conv/Conv" not in out.split("batch 32")[0], out
    old = BENCH.replace(" | conv |", " |").replace(" 3->32 6x6 s2 640x640 |", "").replace(" 32->64 3x3 s2 320x320 |", "")
    old = old.replace(" 512->256 1x1 s1 20x20 |", "").replace(" - | 19.0", " 19.0")
    rc, out, err = run(old, PEER)
    assert rc == 1 and "no convolution of the profile matched" in err, (rc, out, err)
    print("merge_profiles: ok")


if __name__ == "__main__":
    main()
