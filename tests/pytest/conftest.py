"""Shared fixtures of the Python test suite (tests/pytest): the test material, the C++ CLI the
results are compared against, and a helper to run it.

Data: $YOLOCU_DATA_DIR, else ../shared/data beside the repository (tests skip visibly without it).
CLI: $YOLOCU_CLI, else the `yolocu` executable installed inside the package (the C++ CLI built
from the same sources by the same `pip install .`)."""
import json
import os
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.abspath(os.environ.get("YOLOCU_DATA_DIR") or os.path.join(REPO, "..", "shared", "data"))  # tests run in tmp_path


def data_path(*parts):
    p = os.path.join(DATA, *parts)
    if not os.path.exists(p):
        pytest.skip(f"test material missing: {p} (set YOLOCU_DATA_DIR)")
    return p


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    """Every test runs in its own temporary folder: what a `yolocu detect` run saves by default
    (runs/detect/predict, as ultralytics' predict) lands there, never in the repository."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def cli():
    exe = os.environ.get("YOLOCU_CLI")
    if not exe:
        from yolocu.cli import cli_path
        exe = cli_path()
    if not os.path.isfile(exe):
        pytest.fail(f"the yolocu CLI is missing: {exe}")
    return exe


def run_cli_json(cli, args, tmp_path, name="out.json", timeout=600):
    """Runs `yolocu <args> --json <tmp>` and returns the parsed JSON."""
    out = os.path.join(str(tmp_path), name)
    proc = subprocess.run([cli] + list(args) + ["--json", out, "--quiet"], capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"yolocu {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}"
    with open(out) as f:
        return json.load(f)
