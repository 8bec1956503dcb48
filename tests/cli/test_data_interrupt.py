"""Ctrl-C in `kag data build`: a real SIGINT to its process group mid-filter stops it with 130,
leaves no process behind, and a rerun resumes to the same complete dataset."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kag.core.records import read_jsonl
from tests.cli.test_run_eval import _group_alive
from tests.conftest import default_sigint, run_kag

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kernelbench_sample"


def _build_args(out: Path) -> list[str]:
    return ["data", "build", "--out", str(out), "--crawler", "torch", "--n", "12", "--device", "cpu",
            "--workers", "2", "--window-ms", "0.05,100", "--compile-backend", "aot_eager", "--timeout", "60",
            "--against", f"kernelbench:{SAMPLE}"]


@pytest.mark.slow
def test_ctrl_c_stops_kag_data_build_mid_filter_and_a_rerun_resumes(tmp_path: Path) -> None:
    out = tmp_path / "data"
    filtered = out / "filtered.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "kag.cli.main", *_build_args(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=default_sigint)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if filtered.exists() and filtered.read_text().count("\n") >= 1:
            break
        time.sleep(0.1)
    assert proc.poll() is None, "the build ended before it could be interrupted"
    t0 = time.time()
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert time.time() - t0 < 60 and "Traceback" not in stderr
    time.sleep(1)
    assert _group_alive(proc.pid) == []  # filter workers, judges, the resource tracker: all gone
    manifest = json.loads((out / "manifest.json").read_text())
    assert not manifest["stages"].get("filter", {}).get("complete")

    again = run_kag(*_build_args(out), "--quiet")
    assert again.returncode == 0, again.stderr
    stages = json.loads((out / "manifest.json").read_text())["stages"]
    assert all(stages[s]["complete"] for s in ("crawl", "compose", "filter", "decontam", "output"))
    composed = [r["id"] for r in read_jsonl(out / "composed.jsonl")]
    kept = [r["id"] for r in read_jsonl(filtered)]
    rejected = [r["id"] for r in read_jsonl(out / "filter_rejects.jsonl")]
    assert len(kept) + len(rejected) == len(set(kept) | set(rejected))  # nothing checked twice
    assert set(composed) == set(kept) | set(rejected)
