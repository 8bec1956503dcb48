"""The example plugin's data kinds (examples/plugins/kag-example-plugin/kag_example_plugin/data.py),
pip-installed and found by entry point: the dataset through ``kag tasks``, the crawler and the composer
through the ``kag data`` stages that select them, and each kind through ``Plugins().create`` against
its contract."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.cli.conftest import run_with_plugin
from tests.conftest import run_kag

NAMES = {"dataset": "example-tiny", "crawler": "example-seeds", "composer": "example-chain",
         "filter": "example-finite"}
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kernelbench_sample"
ORIGIN = "kag-example-plugin 0.1.0"


def _kag(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    proc = run_kag(*args, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_each_is_listed_as_the_example_plugins(example_plugin):
    kinds = json.loads(_kag(example_plugin, "plugins", "--json", "--plugin", "composer=example-chain").stdout)["kinds"]
    for kind, name in NAMES.items():
        rows = {r["name"]: r for r in kinds[kind]}
        assert name in rows, (kind, sorted(rows))
        assert rows[name]["origin"] == ORIGIN, (kind, rows[name])
    assert {r["name"] for r in kinds["composer"] if r["selected"]} == {"example-chain"}


def test_the_commands_take_the_dataset_the_crawler_and_the_composer(example_plugin, tmp_path):
    listed = json.loads(_kag(example_plugin, "tasks", "--dataset", "example-tiny", "--ids", "2-3", "--json").stdout)
    assert [t["name"] for t in listed["tasks"]] == ["example-tiny/2_row_softmax", "example-tiny/3_linear_gelu"]
    assert listed["skipped"] == []

    out = tmp_path / "data"
    _kag(example_plugin, "data", "crawl", "--out", str(out), "--crawler", "example-seeds", "--quiet")
    crawled = json.loads((out / "manifest.json").read_text())["stages"]["crawl"]["crawlers"]
    assert list(crawled) == ["example-seeds"]
    assert (crawled["example-seeds"]["found"], crawled["example-seeds"]["instantiated"]) == (6, 5)
    assert list(crawled["example-seeds"]["failures"]) == ["cholesky"]

    config = tmp_path / "kag.toml"  # the chosen plugins' options, by kind and name
    config.write_text('[composers.example-chain]\nexclude = ["softcap"]\n\n[filters.example-text]\nmin_chars = 10\n')
    _kag(example_plugin, "data", "compose", "--out", str(out), "--composer", "example-chain", "--n", "4",
         "--mix", "torch#3=1", "--profile", "cpu", "--quiet", "--config", str(config))
    composed = [json.loads(line) for line in (out / "composed.jsonl").read_text().splitlines()]
    assert len(composed) == 4
    assert json.loads((out / "manifest.json").read_text())["stages"]["compose"]["params"]["composer_params"] == \
        {"profile": "cpu", "exclude": ["softcap"]}
    shape_keeping = {"squared_relu", "signed_sqrt", "rms_norm"}  # not glu_proj (a Linear, f -> f2/2), not softcap
    for task in composed:
        assert task["composer"] == "example-chain" and task["data_source"] == "torch#3"
        assert len(task["ops"]) == 3 and set(task["ops"]) <= shape_keeping, task["ops"]

    # the filter chosen by name for the stage, its verdicts recorded as its own
    _kag(example_plugin, "data", "filter", "--out", str(out), "--filter", "example-finite", "--device", "cpu",
         "--quiet")
    stage = json.loads((out / "manifest.json").read_text())["stages"]["filter"]
    assert stage["params"]["filter"] == "example-finite" and stage["kept"] + stage["rejected"] == 4
    assert stage["kept"] == 4, stage  # the chains of squared ReLU, softcap... are finite and small
    again = run_kag("data", "filter", "--out", str(out), "--device", "cpu", "--quiet", env=example_plugin)
    assert again.returncode == 2 and "finished with other parameters" in again.stderr  # not the built-in's verdicts

    # the decontamination filter chosen by name, with its kag.toml options; an execution filter refused
    wrong = run_kag("data", "decontam", "--out", str(out), "--decontam", "example-finite", env=example_plugin)
    assert wrong.returncode == 2 and "is not a decontamination filter" in wrong.stderr, wrong.stderr[-2000:]
    _kag(example_plugin, "data", "decontam", "--out", str(out), "--decontam", "example-text", "--against",
         f"kernelbench:{SAMPLE}", "--threshold", "0.95", "--config", str(config), "--quiet")
    stage = json.loads((out / "manifest.json").read_text())["stages"]["decontam"]
    assert stage["params"] == {"against": f"kernelbench:{SAMPLE}", "threshold": 0.95, "filter": "example-text",
                               "min_chars": 10}
    assert stage["checked"] == 4 and stage["kept"] == 4 and stage["reference_tasks"] > 0, stage
    report = json.loads((out / "decontam_report.json").read_text())
    assert report["filter"] == "example-text" and report["checked"] == 4 and 0 < report["max"] < 0.95


def test_each_runs_through_its_contract(example_plugin):
    code = '''
        from kag.plugin import (ComposeError, Composer, ComposedTask, Crawler, Dataset, DecontamFilter,
                                ExecutionFilter, Plugins, check_task_code)
        pl = Plugins()
        dataset = pl.create("dataset", "example-tiny", ids="1,3")
        crawler, composer = pl.create("crawler", "example-seeds"), pl.create("composer", "example-chain")
        filt = pl.create("filter", "example-finite", max_numel=4096)
        assert isinstance(dataset, Dataset) and isinstance(crawler, Crawler) and isinstance(composer, Composer)
        assert isinstance(filt, ExecutionFilter) and not isinstance(filt, DecontamFilter)

        loaded = dataset.load()
        print("tasks", [(t.name, t.problem_id) for t in loaded.tasks], len(loaded.skipped))
        crawled = crawler.crawl()
        print("seeds", sorted(s.op for s in crawled.seeds), crawled.failed)
        task = composer.compose(crawled.seeds, "torch#2", 0, seed=1)
        assert isinstance(task, ComposedTask) and task.code == composer.compose(crawled.seeds, "torch#2", 0, seed=1).code
        check_task_code(task.code, "<composed>")
        print("composed", len(task.ops), task.made_by["input_shape"][-1] in (32, 64, 128))
        rule = pl.create("composer", "rule", profile="cpu").compose(crawled.seeds, "torch#2", 0)
        print("rule", len(rule.ops), set(rule.ops) <= {s.op for s in crawled.seeds})
        try:
            composer.compose(crawled.seeds, "transformers", 0)
        except ComposeError as exc:
            print("rejected", exc)

        head = "import torch\\nclass Model(torch.nn.Module):\\n    def forward(self, x):\\n        return "
        tail = "\\ndef get_inputs():\\n    return [torch.ones(8, 8)]\\ndef get_init_inputs():\\n    return []\\n"
        items = [("relu", head + "torch.relu(x)" + tail), ("overflow", head + "torch.exp(x * 1000)" + tail),
                 ("big", head + "x.repeat(16, 64)" + tail), ("broken", head + "x @ torch.ones(3, 3)" + tail)]
        for key, verdict in filt.run(items):
            print("verdict", key, verdict["ok"], verdict.get("reason"))
    '''
    lines = run_with_plugin(code, example_plugin, timeout=120).strip().splitlines()
    assert lines[0] == "tasks [('example-tiny/1_scaled_relu', 1), ('example-tiny/3_linear_gelu', 3)] 0"
    assert lines[1].startswith("seeds ['glu_proj', 'rms_norm', 'signed_sqrt', 'softcap', 'squared_relu'] "
                               "{'cholesky': 'forward failed ("), lines[1]
    assert lines[2] == "composed 2 True"
    assert lines[3] == "rule 2 True"  # the built-in composer stacks the example's seeds too
    assert lines[4].startswith("rejected example-chain stacks shape-keeping torch seeds"), lines[4]
    assert lines[5:] == ["verdict relu True None", "verdict overflow False non_finite_output",
                         "verdict big False too_large", "verdict broken False run_error"]
