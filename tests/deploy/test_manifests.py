"""deploy/*.yaml against the Kubernetes API schemas (kubernetes-validate from PyPI, strict: unknown
fields fail too), and the probes and ports the serving docs promise."""
import glob
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MANIFESTS = sorted(glob.glob(os.path.join(REPO, "deploy", "*.yaml")))
yaml = pytest.importorskip("yaml")
pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (scripts/requirements.txt) is not installed")


def validate(paths):
    exe = os.path.join(os.path.dirname(sys.executable), "kubernetes-validate")
    return subprocess.run([exe, "--strict", *paths], capture_output=True, text=True, timeout=120)


def test_every_manifest_is_valid():
    assert len(MANIFESTS) >= 3
    out = validate(MANIFESTS)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("passed") == len(MANIFESTS), out.stdout


def test_the_validator_can_fail(tmp_path):
    doc = yaml.safe_load(open(os.path.join(REPO, "deploy", "deployment.yaml")))
    doc["spec"]["replicas"] = "two"
    doc["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["pathh"] = "/x"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    out = validate([str(bad)])
    assert out.returncode != 0 and "replicas" in out.stdout + out.stderr


def test_probes_ports_and_scraping():
    doc = yaml.safe_load(open(os.path.join(REPO, "deploy", "deployment.yaml")))
    pod = doc["spec"]["template"]
    c = pod["spec"]["containers"][0]
    assert c["command"] == ["yolocu", "serve"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert {p["containerPort"] for p in c["ports"]} == {8000, 8001, 8002}
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == "8002"
