"""``kag train report RUN RUN RUN``: one page over seeds, mean ± sd and a band, from metrics.jsonl."""

import json

from click.testing import CliRunner

from kag.cli.main import cli
from kag.plugins.algorithms.ppo.seeds_report import per_step, write_seeds_report


def fake_run(folder, seed, rewards, faster):
    folder.mkdir(parents=True)
    with open(folder / "metrics.jsonl", "w") as f:
        for step, (r, fc) in enumerate(zip(rewards, faster), start=1):
            f.write(json.dumps({"stage": "warmup", "step": step, "seed": seed, "reward_mean": r, "pass_frac": 0.5,
                                "faster_than_compile_frac": fc}) + "\n")


def test_three_seeds_give_means_bands_and_each_seed(tmp_path):
    ten = list(range(10))
    fake_run(tmp_path / "s0", 0, [-1.0 + 0.2 * i for i in ten], [0.0] * 5 + [0.5] * 5)
    fake_run(tmp_path / "s1", 1, [-1.0 + 0.3 * i for i in ten], [0.0] * 5 + [1.0] * 5)
    fake_run(tmp_path / "s2", 2, [-1.0] * 10, [0.0] * 10)
    res = CliRunner().invoke(cli, ["train", "report", *(str(tmp_path / f"s{i}") for i in range(3))])
    assert res.exit_code == 0, res.output
    page = tmp_path / "seeds_report.md"
    assert res.output.strip() == str(page)
    text = page.read_text()
    # seed 0: first five steps mean -0.6, last five 0.4; seed 1: -0.4 -> 1.1; seed 2: -1 -> -1
    assert "| 0 | 10 | -0.600 -> 0.400 |" in text and "| 1 | 10 | -0.400 -> 1.100 |" in text
    assert "| 2 | 10 | -1.000 -> -1.000 |" in text
    assert "| **mean ± sd** | | | -0.667 ± 0.306 -> 0.167 ± 1.069 |" in text
    assert "0.000 ± 0.000 -> 0.500 ± 0.500" in text  # faster than compile
    assert (tmp_path / "seeds_report_warmup.png").stat().st_size > 1000
    rows = per_step([[{"step": 1, "k": 1.0}, {"step": 2, "k": 3.0}], [{"step": 1, "k": 3.0}]], "k")
    assert rows == [(1, 2.0, 1.0, 3.0)]  # only steps every run has


def test_a_folder_without_metrics_is_a_one_line_error(tmp_path):
    fake_run(tmp_path / "s0", 0, [0.0], [0.0])
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(cli, ["train", "report", str(tmp_path / "s0"), str(tmp_path / "empty")])
    assert res.exit_code == 2 and f"{tmp_path / 'empty'}: no metrics.jsonl here" in res.output
    out = write_seeds_report([tmp_path / "s0"], tmp_path / "one.md", plots=False)
    assert "| `" + str(tmp_path / "s0") + "` | 0 | 1 |" in out.read_text()
