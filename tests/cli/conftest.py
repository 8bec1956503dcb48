"""The example third-party plugin (examples/plugins/kag-example-plugin), pip-installed once a session
into a folder of its own: subprocesses see it through PYTHONPATH (its entry points included), and the
test venv is never changed, so two runs at once cannot uninstall it under each other."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EXAMPLE_PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "kag-example-plugin"


@pytest.fixture(scope="session")
def example_plugin(tmp_path_factory) -> dict[str, str]:
    """The environment a subprocess needs to find the installed example plugin."""
    target = tmp_path_factory.mktemp("example-plugin-site")
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "install", "--no-deps",
                    "--no-build-isolation", "--target", str(target), str(EXAMPLE_PLUGIN)], check=True)
    path = os.pathsep.join(p for p in (str(target), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}


def run_with_plugin(code: str, env: dict[str, str], cwd: str | Path | None = None, timeout: float = 300) -> str:
    """``python -c CODE`` (dedented) in a fresh process that sees the example plugin; its stdout."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=timeout, cwd=cwd, env={**os.environ, **env})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout
