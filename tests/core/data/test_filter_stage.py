"""The filter stage of `kag data`: a timeout or a crashed worker is checked once more on a rerun."""

from __future__ import annotations

from pathlib import Path

from kag.core.data.stages import exec_filter, progress_bar
from kag.core.data.synthesis import Manifest
from kag.core.plugins import Plugins
from kag.core.records import read_jsonl
from tests.plugins.data.test_filter_exec import GOOD, HANG, WINDOW

OPTS = {"device": "cpu", "workers": 1, "timeout_s": 4, "window_ms": WINDOW, "compile_backend": "aot_eager"}


def test_a_timeout_is_retried_once_on_a_rerun_then_final_with_both_attempts(tmp_path: Path):
    out, manifest = tmp_path / "filtered.jsonl", Manifest(tmp_path / "manifest.json")
    candidates = [{"id": "hang", "code": HANG, "ops": ["sleep"], "data_source": "test"},
                  {"id": "good", "code": GOOD, "ops": ["conv2d", "relu"], "data_source": "test"}]
    with progress_bar(False) as bar:
        kept = exec_filter(Plugins(), candidates, out, manifest, OPTS, bar)
    assert [r["id"] for r in kept] == ["good"]
    first = read_jsonl(out.with_name("filter_rejects.jsonl"))
    assert [(r["id"], r["reason"], r.get("final")) for r in first] == [("hang", "timeout", None)]
    st = manifest.stage("filter")
    assert not st["complete"] and st["retry_on_rerun"] == 1  # the machine may have caused it: not final

    with progress_bar(False) as bar:
        kept = exec_filter(Plugins(), candidates, out, Manifest(tmp_path / "manifest.json"), OPTS, bar)
    rejects = read_jsonl(out.with_name("filter_rejects.jsonl"))
    assert [r["id"] for r in kept] == ["good"] and len(rejects) == 2  # only the timeout was checked again
    assert rejects[-1]["final"] and "first attempt: timeout" in rejects[-1]["detail"]
    st = Manifest(tmp_path / "manifest.json").stage("filter")
    assert st["complete"] and st["rejected"] == 1 and st["reasons"] == {"timeout": 1} and st["retry_on_rerun"] == 0

    manifest = Manifest(tmp_path / "manifest.json")  # a run that must redo the stage: the final verdict stands
    manifest.stage("filter")["complete"] = False
    with progress_bar(False) as bar:
        exec_filter(Plugins(), candidates, out, manifest, OPTS, bar)
    assert len(read_jsonl(out.with_name("filter_rejects.jsonl"))) == 2
