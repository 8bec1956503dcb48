"""The analysis step: an untouched workspace's profile shows the reference's ops and the target."""

import json
from pathlib import Path

from tests.conftest import run_kag

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


def test_profiling_an_untouched_workspace_analyses_the_reference(tmp_path):
    ws = tmp_path / "ws"
    made = run_kag("workspace", str(EXAMPLES / "softmax" / "cpu" / "model.py"), str(ws), "--backend", "cpu")
    assert made.returncode == 0, made.stderr
    proc = run_kag("profile", "--workspace", str(ws), "--backend", "cpu", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "USDT" not in proc.stderr and "profiler_start" not in proc.stderr  # Kineto's banner is noise
    analysis = json.loads(proc.stdout)
    assert analysis["kernels"][0]["name"] == "aten::softmax" and analysis["kernels"][0]["share"] > 0.5
    assert abs(analysis["target_ms"] - 0.95 * analysis["compile_ms"]) < 1e-9
    assert analysis["eager_ms"] > 0
    text = run_kag("profile", "--workspace", str(ws), "--backend", "cpu").stdout
    assert "reference analysis on cpu" in text and "target: <=" in text
