"""`kag data`: the whole pipeline with the rule composer on a small CPU budget, resumed and reloaded."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kag.cli.main import cli
from kag.core.records import append_jsonl, read_jsonl
from tests.conftest import default_sigint

FILTER = ["--device", "cpu", "--workers", "2", "--window-ms", "0.05,100", "--compile-backend", "aot_eager",
          "--timeout", "60"]


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, ["data", *args, "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.slow
def test_pipeline_builds_an_ops6k_dataset_and_resumes(tmp_path: Path):
    from kag.plugins.datasets.ops6k import Ops6kDataset

    out = tmp_path / "data"
    config = tmp_path / "kag.toml"
    config.write_text('[crawlers.transformers]\nfamilies = "llama,bert"\n')
    crawlers = ["--crawler", "torch"] + (["--crawler", "transformers"] if importlib.util.find_spec("transformers") else [])
    run("crawl", "--out", str(out), "--config", str(config), *crawlers)
    run("compose", "--out", str(out), "--n", "20")
    run("filter", "--out", str(out), *FILTER)

    # a benchmark holding one of the kept tasks: decontamination must drop exactly that one
    kept = read_jsonl(out / "filtered.jsonl")
    assert kept, "no task survived the filter"
    bench = tmp_path / "bench" / "level1"
    bench.mkdir(parents=True)
    (bench / "1_Copy.py").write_text(kept[0]["code"])
    text = run("build", "--out", str(out), "--config", str(config), *crawlers, "--n", "20", *FILTER,
               "--against", f"kernelbench:{tmp_path / 'bench'}")
    assert "tasks/min" in text

    manifest = json.loads((out / "manifest.json").read_text())
    st = manifest["stages"]
    assert all(st[s]["complete"] for s in ("crawl", "compose", "filter", "decontam", "output"))
    assert manifest["versions"]["torch"]
    # every composed task is either kept or rejected with a reason
    composed = {r["id"] for r in read_jsonl(out / "composed.jsonl")}
    rejected = read_jsonl(out / "filter_rejects.jsonl")
    assert composed == {r["id"] for r in kept} | {r["id"] for r in rejected}
    assert all(r["reason"] and r["detail"] for r in rejected)
    assert sum(st["filter"]["reasons"].values()) == len(rejected) and st["filter"]["throughput_tasks_per_min"] > 0
    # every compose slot produced a task or a final reason
    final = [r for r in read_jsonl(out / "compose_rejects.jsonl") if r["final"]]
    assert len(composed) + len(final) == 20
    dropped = read_jsonl(out / "decontam_rejects.jsonl")
    assert [d["id"] for d in dropped] == [kept[0]["id"]] and dropped[0]["similarity"] == 1.0
    assert (out / "decontam_hist.png").exists() and (out / "decontam.json").exists()

    loaded = Ops6kDataset(str(out / "data.parquet")).load()
    assert not loaded.skipped and len(loaded.tasks) == len(kept) - 1 == st["output"]["rows"]
    assert all(t.metadata["ops"] and t.metadata["data_source"] for t in loaded.tasks)
    assert {t.metadata["data_source"].split("#")[0] for t in loaded.tasks} <= {"torch", "transformers"}

    # an interrupted filter resumes: only the missing records are checked again
    manifest["stages"]["filter"]["complete"] = False
    (out / "manifest.json").write_text(json.dumps(manifest))
    lines = (out / "filtered.jsonl").read_text().splitlines(keepends=True)
    (out / "filtered.jsonl").write_text("".join(lines[:-2]) + lines[-2][:10])  # torn last line
    run("build", "--out", str(out), "--config", str(config), *crawlers, "--n", "20", *FILTER,
        "--against", f"kernelbench:{tmp_path / 'bench'}")
    again = json.loads((out / "manifest.json").read_text())["stages"]["filter"]
    assert again["checked"] == st["filter"]["checked"] + 2 and again["kept"] == len(kept)


def test_errors_are_one_line(tmp_path: Path):
    result = CliRunner().invoke(cli, ["data", "compose", "--out", str(tmp_path), "--n", "3"])
    assert result.exit_code == 2 and "run `kag data crawl" in result.output
    for stage, before in (("filter", "compose"), ("decontam", "filter")):  # not an empty result in a wrong folder
        result = CliRunner().invoke(cli, ["data", stage, "--out", str(tmp_path / "elsewhere")])
        assert result.exit_code == 2 and f"run `kag data {before}" in result.output, result.output
    assert not (tmp_path / "elsewhere").exists()
    (tmp_path / "composed.jsonl").write_text("")
    result = CliRunner().invoke(cli, ["data", "filter", "--out", str(tmp_path), "--device", "cuda"])
    import torch

    if not torch.cuda.is_available():
        assert result.exit_code == 2 and "no CUDA GPU" in result.output
    result = CliRunner().invoke(cli, ["data", "compose", "--out", str(tmp_path), "--mix", "torch#7=1"])
    assert result.exit_code == 2 and "unknown mix bucket" in result.output


ANSWER = ("Two ops:\n```python\nimport torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
          "    def __init__(self):\n        super().__init__()\n        self.norm = nn.LayerNorm(64)\n\n"
          "    def forward(self, x):\n        return torch.tanh(self.norm(x))\n\n\n"
          "def get_inputs():\n    return [torch.rand(16, 64)]\n\n\ndef get_init_inputs():\n    return []\n```\n")


def test_llm_composer_with_the_replay_policy(tmp_path: Path):
    out = tmp_path / "data"
    run("crawl", "--out", str(out), "--crawler", "torch")
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": ANSWER}]))  # one answer: the second slot gets none
    text = run("compose", "--out", str(out), "--n", "2", "--mix", "torch#2=1", "--composer", "llm",
               "--policy", "replay", "--policy-option", f"path={script}")
    assert "1 composed tasks" in text
    (rec,) = read_jsonl(out / "composed.jsonl")
    assert rec["ops"] == ["LayerNorm", "Tanh"] and rec["composer"] == "llm" and rec["data_source"] == "torch#2"
    finals = [r for r in read_jsonl(out / "compose_rejects.jsonl") if r["final"]]
    assert len(finals) == 1 and "code block" in finals[0]["reason"]


def session_processes(sid: int) -> list[tuple[int, str]]:
    """``(pid, command line)`` of every live (not zombie) process of session ``sid``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            state, _ppid, _pgrp, session = (proc / "stat").read_text().rsplit(")", 1)[1].split()[:4]
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue  # not a process, or gone meanwhile
        if int(session) == sid and state not in "ZX":
            found.append((int(proc.name), cmd[:120]))
    return found


@pytest.fixture(scope="module")
def composed_folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kill") / "data"
    run("crawl", "--out", str(out), "--crawler", "torch")
    run("compose", "--out", str(out), "--n", "2", "--mix", "torch#2=1")
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_killing_build_mid_filter_leaves_no_process(composed_folder: Path, tmp_path: Path, sig: signal.Signals):
    """A real `kag data build`, killed while its workers check tasks: nothing of its tree survives."""
    out = tmp_path / "data"
    shutil.copytree(composed_folder, out)
    started = tmp_path / "started"
    block = f"import pathlib, time; pathlib.Path({str(started)!r}).touch(); time.sleep(600)"
    tasks = read_jsonl(out / "composed.jsonl")
    for rec in tasks:  # the composed tasks, blocking in forward: the kill lands mid-filter
        rec["code"] = rec["code"].replace("    def forward(self, x):\n", f"    def forward(self, x):\n        {block}\n")
    (out / "composed.jsonl").unlink()
    append_jsonl(out / "composed.jsonl", *tasks)
    cmd = [sys.executable, "-m", "kag.cli.main", "data", "build", "--out", str(out), "--crawler", "torch",
           "--n", "2", "--mix", "torch#2=1", *FILTER[:-1], "600", "--quiet"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=default_sigint)
    try:
        deadline = time.monotonic() + 300
        while not started.exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no worker started a task in 300 s"
            time.sleep(0.2)
        before = session_processes(proc.pid)
        assert len(before) >= 4, before  # kag, two workers, the multiprocessing resource tracker
        os.kill(proc.pid, sig)
        proc.wait(60)
        deadline = time.monotonic() + 30
        while (left := session_processes(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"survived {signal.Signals(sig).name} of kag: {left}"
    finally:
        for pid, _ in session_processes(proc.pid):
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stderr.close()


def test_a_composers_kag_toml_options_are_under_the_command_lines():
    """[composers.NAME] reaches the composer; --profile wins over the table's, and auto takes the table's."""
    from kag.cli.data_cmd import _composer_opts
    from kag.core.config import Config

    config = Config(data={"composers": {"rule": {"profile": "gpu", "max_ops": 3}}})
    assert _composer_opts(None, config, "rule", "auto", None, ()) == {"profile": "gpu", "max_ops": 3}
    assert _composer_opts(None, config, "rule", "cpu", None, ()) == {"profile": "cpu", "max_ops": 3}
