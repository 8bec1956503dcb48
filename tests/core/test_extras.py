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
