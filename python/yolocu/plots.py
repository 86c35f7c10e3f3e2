"""Draws the plots of `yolocu eval --plots DIR` from the data it wrote there, with matplotlib.

    python -m yolocu.plots DIR          # the Python package
    python3 python/yolocu/plots.py DIR  # a source tree: needs only matplotlib and numpy

Reads DIR/curves.json and DIR/confusion_matrix.json and writes PR_curve.png, F1_curve.png,
P_curve.png, R_curve.png and confusion_matrix.png (counts) and confusion_matrix_normalized.png
(each true class's column summing to 1), laid out as ultralytics' val plots them.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _curve(path, x, ys, names, xlabel, ylabel, mean_label):
    fig, ax = plt.subplots(1, 1, figsize=(9, 6), tight_layout=True)
    ys = np.asarray(ys, dtype=float).reshape(len(names), -1)
    if 0 < len(names) < 21:  # a legend per class only when it stays readable
        for i, y in enumerate(ys):
            ax.plot(x, y, linewidth=1, label=names[i])
    else:
        ax.plot(x, ys.T, linewidth=1, color="grey")
    if len(names):
        ax.plot(x, ys.mean(0), linewidth=3, color="blue", label=mean_label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(bbox_to_anchor=(1.04, 1), loc="upper left")
    ax.set_title(f"{ylabel}-{xlabel} Curve" if ylabel != "Precision" or xlabel != "Recall" else "Precision-Recall Curve")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _confusion(path, matrix, names, normalize):
    m = np.asarray(matrix, dtype=float)
    if normalize:
        m = m / (m.sum(0).reshape(1, -1) + 1e-9)
    labels = list(names) + ["background"]
    n = len(labels)
    fig, ax = plt.subplots(1, 1, figsize=(12, 9), tight_layout=True)
    im = ax.imshow(m, cmap="Blues", vmin=0.0, vmax=1.0 if normalize else None)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    ticks = n < 30
    ax.set_xticks(range(n) if ticks else [])
    ax.set_yticks(range(n) if ticks else [])
    if ticks:
        ax.set_xticklabels(labels, rotation=90, fontsize=8)
        ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("True")
    ax.set_ylabel("Predicted")
    ax.set_title("Confusion Matrix" + (" Normalized" if normalize else ""))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def draw(directory):
    """Writes the PNG files into `directory`; returns their paths."""
    with open(os.path.join(directory, "curves.json"), encoding="utf-8") as f:
        curves = json.load(f)
    with open(os.path.join(directory, "confusion_matrix.json"), encoding="utf-8") as f:
        cm = json.load(f)
    x = np.asarray(curves["x"], dtype=float)
    classes = curves["classes"]
    names = [c["name"] for c in classes]
    map50 = curves["metrics"]["map50"]
    out = []
    for file, key, xlabel, ylabel, mean in (
        ("PR_curve.png", "pr", "Recall", "Precision", f"all classes {map50:.3f} mAP@0.5"),
        ("F1_curve.png", "f1", "Confidence", "F1", "all classes"),
        ("P_curve.png", "precision", "Confidence", "Precision", "all classes"),
        ("R_curve.png", "recall", "Confidence", "Recall", "all classes"),
    ):
        path = os.path.join(directory, file)
        _curve(path, x, [c[key] for c in classes], names, xlabel, ylabel, mean)
        out.append(path)
    if cm["matrix"]:
        for file, normalize in (("confusion_matrix.png", False), ("confusion_matrix_normalized.png", True)):
            path = os.path.join(directory, file)
            _confusion(path, cm["matrix"], cm["names"], normalize)
            out.append(path)
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m yolocu.plots DIR  (DIR: the folder of yolocu eval --plots DIR)", file=sys.stderr)
        return 2
    try:
        paths = draw(argv[0])
    except (OSError, ValueError, KeyError) as e:
        print(f"yolocu.plots: {argv[0]}: {e}", file=sys.stderr)
        return 1
    print("plots: " + ", ".join(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
