"""Writes an --input-data file for Triton's perf_analyzer: one JPEG per entry for the yolocu
backend's IMAGE input (BYTES, one element per batch item), so that perf_analyzer sends real
images, round robin, with requests of any batch size (-b).

    python3 bench/perf_analyzer_input.py --images DIR [--limit 128] [--rotate N] --out images.json

--rotate N starts the round robin at the N-th image (perf_analyzer processes given files rotated
apart send different images at the same moment, as independent clients do).

A BYTES tensor given as "b64" is sent as decoded: Triton's serialized form, each element a 4-byte
little-endian length followed by its bytes.
"""
import argparse
import base64
import json
import os
import struct
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", required=True, help="a folder of JPEG files")
    ap.add_argument("--limit", type=int, default=128, help="at most this many images")
    ap.add_argument("--rotate", type=int, default=0, help="start the round robin at this image")
    ap.add_argument("--out", required=True, help="the JSON file to write")
    args = ap.parse_args()
    names = sorted(f for f in os.listdir(args.images) if f.lower().endswith((".jpg", ".jpeg")))[: args.limit]
    if not names:
        sys.exit(f"perf_analyzer_input: no JPEG files in {args.images}")
    r = args.rotate % len(names)
    names = names[r:] + names[:r]
    data = []
    for n in names:
        blob = open(os.path.join(args.images, n), "rb").read()
        element = struct.pack("<I", len(blob)) + blob
        data.append({"IMAGE": {"b64": base64.b64encode(element).decode("ascii"), "shape": [1]}})
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"data": data}, f)
    os.replace(tmp, args.out)
    print(f"{len(data)} images -> {args.out}")


if __name__ == "__main__":
    main()
