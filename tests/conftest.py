"""Shared test fixtures: paths to the bundled KernelBench sample and helpers to run the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
KERNELBENCH = Path(os.environ.get("KAG_TEST_KERNELBENCH", REPO.parent / "shared" / "kernelbench"))


@pytest.fixture(scope="session")
def kernelbench_path() -> Path:
    if not (KERNELBENCH / "level1").is_dir():
        pytest.skip(f"KernelBench sample not found at {KERNELBENCH} (set KAG_TEST_KERNELBENCH)")
    return KERNELBENCH


def run_kag(*args: str, env: dict | None = None, cwd: str | Path | None = None,
            input: str | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real ``kag`` CLI in a subprocess, as a user would."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "kag.cli.main", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd, input=input, timeout=timeout)
