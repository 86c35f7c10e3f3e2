"""Puts PyTorch's time for each convolution next to yolocu's (issue #12's per-layer profile).

usage: merge_profiles.py BENCH_LOG PEER_LOG [--top N]

BENCH_LOG: `bench_cuda_engine --profile` output (its per-layer tables, whose `conv` column is the
ONNX convolution as "cin->cout kxk sS HxW"); PEER_LOG: `bench/peer_torch_forward.py --per-layer`
output (each distinct Conv+SiLU module of ultralytics' model timed alone, PyTorch FP16
channels_last, cudnn.benchmark, CUDA graph). Prints, per model and batch, yolocu's convolution rows
(slowest first, at most N) with PyTorch's time for the same shape and the ratio, and the sums over
all matched rows. Both sides time each layer on its own (yolocu: events around each step of an
eager run; PyTorch: the module alone in a graph), so the ratio compares kernels, not whole forwards.
"""
import re
import sys


def model_key(name):
    """yolov5s_random_fp16.onnx / yolov5s.yaml / yolov5s -> yolov5s."""
    return re.split(r"[._]", name.strip())[0]


def parse_bench(text):
    """{(model, batch): [(layer, tactic, shape, us)]} from the per-layer tables (Conv rows)."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*per-layer profile, (\S+) batch (\d+)", line)
        if m:
            cur = (model_key(m.group(1)), int(m.group(2)))
            out[cur] = []
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cur is None or len(cells) not in (10, 11) or cells[2] != "Conv":  # (11: with the 'chain' column)
            continue
        try:
            out[cur].append((cells[1], cells[3], cells[4], float(cells[5])))
        except ValueError:
            continue
    return out


def parse_peer(text):
    """{(model, batch, shape): us per use} from the per-layer table."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or "->" not in cells[2]:
            continue
        try:
            out[(model_key(cells[0]), int(cells[1]), cells[2])] = float(cells[4])
        except ValueError:
            continue
    return out


def merge(bench, peer, top):
    lines = []
    for (model, batch), rows in bench.items():
        matched = [(layer, tactic, shape, us, peer[(model, batch, shape)]) for layer, tactic, shape, us in rows
                   if (model, batch, shape) in peer]
        if not matched:
            continue
        ours, theirs = sum(r[3] for r in matched), sum(r[4] for r in matched)
        lines.append(f"\n{model} batch {batch}: {len(matched)} of {len(rows)} convolutions matched; "
                     f"yolocu {ours:.1f} us, PyTorch {theirs:.1f} us ({theirs / ours:.2f}x)")
        lines.append("| layer | conv | yolocu tactic | yolocu us | PyTorch us | PyTorch / yolocu |")
        lines.append("|---|---|---|---|---|---|")
        for layer, tactic, shape, us, pt in sorted(matched, key=lambda r: -r[3])[:top]:
            lines.append(f"| {layer} | {shape} | {tactic} | {us:.1f} | {pt:.1f} | {pt / us:.2f}x |")
    return "\n".join(lines)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    top = int(argv[argv.index("--top") + 1]) if "--top" in argv else 1000
    with open(argv[1]) as f:
        bench = parse_bench(f.read())
    with open(argv[2]) as f:
        peer = parse_peer(f.read())
    text = merge(bench, peer, top)
    if not text:
        print("no convolution of the profile matched a PyTorch row (profile without its conv column?)", file=sys.stderr)
        return 1
    print(text.lstrip("\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
