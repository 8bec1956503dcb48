"""kag.core.scratch: the folders a Ctrl-C's sweep removes, those another process makes included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kag.core import scratch


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """``remove_all`` sweeps every folder this process knows of, as an interrupted command must. In the
    test process that included the live candidate folder of a judge kept warm by an earlier test (the
    server's): the next in-process evaluation took that judge and its candidate found no TMPDIR (a
    right solution judged wrong, CI). Each test here sweeps registries of its own."""
    monkeypatch.setattr(scratch, "_MADE", set())
    monkeypatch.setattr(scratch, "_TAGS", set())


def test_a_folder_another_process_makes_with_the_tag_is_swept_whether_or_not_it_said_so(tmp_path: Path):
    """A judge killed by a Ctrl-C between making its output folder and telling the orchestrator left
    ``kag-out-*`` behind (tests/cli/test_run_eval.py, in CI): its folders now carry a tag the
    orchestrator chose before starting it."""
    scratch.remember_tagged("feedc0de", [str(tmp_path)])
    code = "from kag.core import scratch; print(scratch.mkdtemp('kag-out-', sys.argv[1]))"
    made = subprocess.run([sys.executable, "-c", f"import sys; {code}", str(tmp_path)], text=True, check=True,
                          capture_output=True, env=dict(os.environ, KAG_SCRATCH_TAG="feedc0de")).stdout.strip()
    assert Path(made).name.startswith("kag-out-feedc0de-") and Path(made).is_dir()
    other = tmp_path / "kag-out-otherjudge-x"
    other.mkdir()
    assert made in scratch.remove_all()
    assert not Path(made).exists() and other.exists()


def test_a_forgotten_tag_is_not_swept(tmp_path: Path):
    scratch.remember_tagged("0ddba11", [str(tmp_path)])
    scratch.forget_tagged("0ddba11")
    kept = tmp_path / "kag-cand-0ddba11-x"
    kept.mkdir()
    scratch.remove_all()
    assert kept.exists()


def test_a_dead_processs_tagged_folders_are_removed_before_its_tag_is_forgotten(tmp_path):
    """A judge killed by a Ctrl-C before removing its candidates' folders: closing it removes what
    carries its tag (only that), so the later sweep, which no longer knows the tag, has nothing left."""
    from kag.core import scratch

    scratch.remember_tagged("abc123", [str(tmp_path)])
    mine = tmp_path / "kag-cand-abc123-x1"
    other = tmp_path / "kag-cand-def456-x1"
    mine.mkdir()
    other.mkdir()
    scratch.remove_tagged("abc123")
    assert not mine.exists() and other.exists()
    assert all(tag != "abc123" for _, tag in scratch._TAGS)
