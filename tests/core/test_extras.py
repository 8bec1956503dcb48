"""A missing optional dependency is one line naming the extra to install, in `kag plugins` too."""

from __future__ import annotations

import importlib.util
import json

import pytest
from click.testing import CliRunner

from kag.core.extras import install_hint, missing


def test_missing_names_the_extra_and_what_needs_it():
    assert missing("json", "anything") is None
    assert install_hint("deepspeed") == "install kag[rl] (pip install 'kag[rl]')"
    line = missing("kag_no_such_module", "the demo")
    assert line == "the demo needs kag_no_such_module, which is not installed: pip install kag_no_such_module"


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_kag_plugins_marks_the_vllm_policy_with_the_extra_to_install():
    from kag.cli.main import cli

    res = CliRunner().invoke(cli, ["plugins", "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    vllm = [row for row in json.loads(res.stdout)["kinds"]["policy"] if row["name"] == "vllm"][0]
    assert not vllm["available"]
    assert vllm["reason"] == "the vllm policy needs vllm, which is not installed: install kag[rl] (pip install 'kag[rl]')"


def test_the_train_extra_installs_on_a_cpu_machine():
    """`kag[train]` is what `kag train` needs anywhere; the GPU-only engines (vLLM, which brings its own
    CUDA torch, and DeepSpeed) are only in `kag[rl]`, which includes it."""
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    names = {req.split(">")[0].split("=")[0].strip() for req in extras["train"]}
    assert names == {"transformers", "tensorboard"}
    assert "kag[train]" in extras["rl"] and any(r.startswith("vllm") for r in extras["rl"])
    assert install_hint("transformers") == "install kag[train] (pip install 'kag[train]')"
