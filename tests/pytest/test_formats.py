"""WebP, TIFF and BMP decoding (libwebp, libtiff, FFmpeg) against Pillow's own decode of files Pillow encoded,
the decode limits on them, folders naming the files they skip, and `.pt` models refused with the
export command. CPU."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import yolocu
from conftest import data_path

Image = pytest.importorskip("PIL.Image", reason="Pillow (scripts/requirements.txt) encodes the test files")


def model_path():
    return data_path("models", "yolov5n.onnx")


@pytest.fixture(scope="module")
def rgb():
    bgr = yolocu.decode(data_path("images", "zidane.jpg"))[::4, ::4]  # 320 x 180, a real photo
    return np.ascontiguousarray(bgr[:, :, ::-1])


def pillow_bgr(path):
    with Image.open(path) as im:
        return np.ascontiguousarray(np.asarray(im.convert("RGB"))[:, :, ::-1])


CASES = {
    "lossless.webp": lambda im, p: im.save(p, "WEBP", lossless=True),
    "lossy.webp": lambda im, p: im.save(p, "WEBP", quality=80),
    "alpha.webp": lambda im, p: im.convert("RGBA").save(p, "WEBP", lossless=True),
    "raw.tif": lambda im, p: im.save(p, "TIFF"),
    "lzw.tiff": lambda im, p: im.save(p, "TIFF", compression="tiff_lzw"),
    "deflate.tif": lambda im, p: im.save(p, "TIFF", compression="tiff_adobe_deflate"),
    "grey.tif": lambda im, p: im.convert("L").save(p, "TIFF"),
    "palette.tif": lambda im, p: im.convert("P").save(p, "TIFF"),
    "rgba.tif": lambda im, p: im.convert("RGBA").save(p, "TIFF"),
    "rgb.bmp": lambda im, p: im.save(p, "BMP"),
    "palette.bmp": lambda im, p: im.convert("P").save(p, "BMP"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_decode_equals_pillow(rgb, tmp_path, name):
    path = str(tmp_path / name)
    CASES[name](Image.fromarray(rgb), path)
    ours = yolocu.decode(path)
    ref = pillow_bgr(path)
    assert ours.shape == ref.shape == (180, 320, 3)
    if name == "lossy.webp":
        # Pillow's wheel carries its own libwebp (another version than Debian's): the same decoder,
        # its YUV -> RGB upsampling may round differently by a level
        assert np.abs(ours.astype(int) - ref.astype(int)).max() <= 2
    else:
        assert np.array_equal(ours, ref)
    with open(path, "rb") as f:
        assert np.array_equal(yolocu.decode(f.read()), ours)  # bytes decode as the file


def test_detect_on_webp_and_tiff_equals_the_decoded_array(rgb, tmp_path):
    det = yolocu.Detector(model_path(), device="cpu")
    for name in ("lossless.webp", "lzw.tiff"):
        path = str(tmp_path / name)
        CASES[name](Image.fromarray(rgb), path)
        np.testing.assert_array_equal(det(path).boxes.data, det(pillow_bgr(path)).boxes.data)


def test_corrupt_and_truncated_files_raise(rgb, tmp_path):
    for name in ("lossless.webp", "lzw.tiff", "rgb.bmp"):
        path = str(tmp_path / name)
        CASES[name](Image.fromarray(rgb), path)
        data = open(path, "rb").read()
        for bad in (data[:40], data[:len(data) // 2]):
            with pytest.raises(ValueError, match="WebP|TIFF|BMP"):
                yolocu.decode(bad)


def run_cli(cli, args):
    return subprocess.run([cli] + args, capture_output=True, text=True, timeout=300)


def test_decode_limits_apply(tmp_path):
    """The default DecodeLimits (16384 pixels a side, 50 M pixels) refuse from the header, before
    allocating: TIFF and BMP 20000 pixels wide (real files), a lossless WebP whose header was
    rewritten to 16000 x 4000 (64 M pixels; WebP sides stop at 16383)."""
    wide = Image.new("RGB", (20000, 1))
    for name, fmt in (("wide.tif", "TIFF"), ("wide.bmp", "BMP")):
        path = str(tmp_path / name)
        wide.save(path, fmt)
        with pytest.raises(MemoryError, match="exceeds the decode limit .*max_width 16384"):
            yolocu.decode(path)
    path = str(tmp_path / "small.webp")
    Image.new("RGB", (8, 8)).save(path, "WEBP", lossless=True)
    data = bytearray(open(path, "rb").read())
    assert data[12:16] == b"VP8L" and data[20] == 0x2F
    bits = int.from_bytes(data[21:25], "little")
    bits = (bits & ~((1 << 28) - 1)) | (16000 - 1) | ((4000 - 1) << 14)
    data[21:25] = bits.to_bytes(4, "little")
    with pytest.raises(MemoryError, match="16000x4000 pixels exceeds the decode limit .*max_pixels 50000000"):
        yolocu.decode(bytes(data))


def test_folder_names_the_files_it_skips(cli, rgb, tmp_path):
    d = tmp_path / "imgs"
    d.mkdir()
    CASES["lossless.webp"](Image.fromarray(rgb), str(d / "a.webp"))
    shutil.copy(data_path("images", "bus.jpg"), d / "b.jpg")
    (d / "notes.txt").write_text("not an image")
    Image.fromarray(rgb).save(str(d / "c.gif"))
    p = run_cli(cli, ["detect", "--model", model_path(), "--device", "cpu", "--verbose", str(d)])
    assert p.returncode == 0, p.stderr
    assert "skipped 2 files that are not images" in p.stderr and "c.gif" in p.stderr and "notes.txt" in p.stderr
    assert "a.webp" in p.stdout and "b.jpg" in p.stdout
    assert [os.path.basename(f) for f in yolocu.list_images(str(d))] == ["a.webp", "b.jpg"]


def test_pt_models_are_refused_with_the_export_command(cli, tmp_path):
    pt = tmp_path / "yolov8n.pt"
    pt.write_bytes(b"PK\x03\x04 not a real checkpoint")
    with pytest.raises(ValueError, match="yolo export model=.*format=onnx"):
        yolocu.Detector(str(pt), device="cpu")
    p = run_cli(cli, ["detect", "--model", str(pt), "--device", "cpu", data_path("images", "bus.jpg")])
    assert p.returncode != 0 and "yolo export model=" in p.stderr and "export.py --weights" in p.stderr, p.stderr
