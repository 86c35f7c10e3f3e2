"""bench/perf_analyzer_input.py on three small files: one entry per JPEG in sorted order, each a
BYTES element in Triton's serialized form (4-byte little-endian length, then the file's bytes);
--rotate N starts the list at the N-th file (wrapping); a folder without JPEGs is refused (exit 1)."""
import base64
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "perf_analyzer_input.py")


def run(folder, out, *extra):
    return subprocess.run([sys.executable, SCRIPT, "--images", folder, "--out", out, *extra],
                          capture_output=True, text=True)


def elements(path):
    out = []
    for entry in json.load(open(path))["data"]:
        assert entry["IMAGE"]["shape"] == [1], entry["IMAGE"]["shape"]
        blob = base64.b64decode(entry["IMAGE"]["b64"])
        (n,) = struct.unpack("<I", blob[:4])
        assert n == len(blob) - 4, (n, len(blob))
        out.append(blob[4:])
    return out


def main():
    with tempfile.TemporaryDirectory() as d:
        files = {"b.jpg": b"\xff\xd8\xff" + b"B" * 10, "a.jpg": b"\xff\xd8\xff" + b"A" * 3,
                 "c.JPEG": b"\xff\xd8\xff" + b"C" * 7, "notes.txt": b"not an image"}
        for name, data in files.items():
            open(os.path.join(d, name), "wb").write(data)
        out = os.path.join(d, "pa.json")
        r = run(d, out)
        assert r.returncode == 0, r.stderr
        assert elements(out) == [files["a.jpg"], files["b.jpg"], files["c.JPEG"]], elements(out)
        r = run(d, out, "--rotate", "4")  # 4 mod 3: starts at the second file
        assert r.returncode == 0, r.stderr
        assert elements(out) == [files["b.jpg"], files["c.JPEG"], files["a.jpg"]], elements(out)
        empty = os.path.join(d, "empty")
        os.mkdir(empty)
        r = run(empty, out)
        assert r.returncode == 1 and "no JPEG files" in r.stderr, (r.returncode, r.stderr)
    print("perf_analyzer_input: order, serialized elements, --rotate and refusal as expected")


if __name__ == "__main__":
    main()
