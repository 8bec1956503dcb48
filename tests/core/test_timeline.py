"""kag eval --timeline: each worker's phases in a file, drawn by bench/scripts/timeline_draw.py (where a
multi-worker run's time goes)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kag.core import timeline
from tests.conftest import run_kag

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def test_points_become_the_phases_they_end_per_thread(tmp_path, monkeypatch):
    path = tmp_path / "t.jsonl"
    monkeypatch.setenv(timeline.ENV, str(path))
    with timeline.in_lane("episode-1"):
        with timeline.span("build"):
            timeline.point("judge: started")
            timeline.point("judge: checks done")
    rows = timeline.read(str(path))
    assert {r["lane"] for r in rows} == {"episode-1"}
    phases = timeline.phases(rows)
    assert [p["label"] for p in phases] == ["build", "judge: checks done"]  # the span, and started -> done
    assert set(timeline.summarize(rows)) == {"build", "judge: checks done"}
    monkeypatch.delenv(timeline.ENV)
    with timeline.span("nothing written"):
        pass
    assert len(timeline.read(str(path))) == 3


@pytest.mark.slow  # 70 s on 2 cores; CI's time is short (run with -m slow)
def test_kag_eval_timeline_has_each_workers_phases_and_the_judges(tmp_path):
    tasks, replays = tmp_path / "tasks", tmp_path / "replays"
    tasks.mkdir()
    replays.mkdir()
    for name in ("relu", "sigmoid"):
        shutil.copy(EXAMPLES / name / "cpu" / "model.py", tasks / f"{name}.py")
        shutil.copy(EXAMPLES / name / "cpu" / "replay.json", replays / f"{name}.json")
    out = tmp_path / "out"
    proc = run_kag("eval", "--dataset", f"local:{tasks}", "--policy", "replay", "--policy-option", f"path={replays}",
                   "--backend", "cpu", "--num-timed", "5", "--concurrency", "2", "--timeline", "--out", str(out),
                   env={"KAG_CACHE_DIR": str(tmp_path / "cache")})  # a cold cache: the builds compile
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "timeline: " in proc.stdout and "seconds summed over workers" in proc.stdout
    rows = timeline.read(str(out / "timeline.jsonl"))
    episodes = {json.loads(line)["episode_id"] for line in (out / "results.jsonl").read_text().splitlines()}
    assert len(episodes) == 2
    for episode in episodes:
        mine = {r["label"] for r in timeline.phases(rows) if r["lane"] == episode}
        assert {"policy", "tool: write", "tool: bash", "build", "compile", "wait: device slot", "judge"} <= mine, mine
        assert any(label.startswith("request: ") for label in mine), mine
        judged = {r["label"] for r in timeline.phases(rows) if r["lane"] == f"{episode} judge"}
        assert {"judge: checks done", "judge: timing done", "judge: result sent"} <= judged, judged
    png = tmp_path / "t.png"
    drawn = subprocess.run([sys.executable, str(REPO / "bench" / "scripts" / "timeline_draw.py"), str(out / "timeline.jsonl"),
                            "--png", str(png)], capture_output=True, text=True)
    assert drawn.returncode == 0, drawn.stderr
    assert png.stat().st_size > 10_000 and "| judge |" in drawn.stdout


def test_lines_that_are_not_spans_are_skipped_and_fields_cannot_replace_a_spans_own(tmp_path, monkeypatch):
    """`kag eval` sums the file at its end: a line another process appended (a string start, a
    missing end, a list) must not end the run with a TypeError."""
    path = tmp_path / "t.jsonl"
    monkeypatch.setenv(timeline.ENV, str(path))
    with timeline.in_lane("episode-1"):
        timeline.point("judge: started", start="a", end="b", lane=3)
        with timeline.span("build", start="x"):
            pass
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"lane":"a","label":"y","start":"s","end":2}\n[1, 2]\n{"lane":"a","label":"y","start":1}\n'
                 '{"lane":"a","label":"y","start":NaN,"end":1}\n{"lane":"a","label":"y","start":true,"end":1}\n')
    rows = timeline.read(str(path))
    assert [r["label"] for r in rows] == ["judge: started", "build"]
    assert all(isinstance(r["start"], float) and r["lane"] == "episode-1" for r in rows)
    assert set(timeline.summarize(rows)) == {"build"}
