"""A real third-party plugin, pip-installed and discovered through its entry point."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_kag

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kag-example-plugin"


@pytest.fixture(scope="module")
def example_plugin_installed():
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-deps", "--no-build-isolation", str(FIXTURE)], check=True)
    yield
    subprocess.run([*pip, "uninstall", "-y", "kag-example-plugin"], check=True)


def _rewards(*args, env=None):
    proc = run_kag("plugins", "--json", *args, env=env)
    assert proc.returncode == 0, proc.stderr
    return {r["name"]: r for r in json.loads(proc.stdout)["kinds"]["reward"]}


def test_entry_point_plugin_is_listed_and_selectable(example_plugin_installed):
    rewards = _rewards()
    assert rewards["example"]["origin"] == "kag-example-plugin 0.1.0"
    assert not rewards["example"]["selected"]
    assert _rewards("--plugin", "reward=example")["example"]["selected"]


def test_it_is_found_by_entry_point_not_import_path(example_plugin_installed):
    code = ("from kag.core.plugins import Plugins, DEFAULT_PLUGINS\n"
            "assert not any('example' in m for m in DEFAULT_PLUGINS)\n"
            "pl = Plugins(); e = pl.entry('reward', 'example'); print(e.plugin, e.origin)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["kag-example-plugin:example", "kag-example-plugin", "0.1.0"]


def test_allow_and_block_lists(example_plugin_installed):
    assert "example" not in _rewards(env={"KAG_DISABLE_PLUGINS": "example"})
    assert "example" not in _rewards(env={"KAG_LOAD_PLUGINS": "some-other-plugin"})
    assert "example" in _rewards(env={"KAG_LOAD_PLUGINS": "kag-example-plugin"})
    assert "milestone" in _rewards(env={"KAG_LOAD_PLUGINS": ""})
