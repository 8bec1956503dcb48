"""A real local sandbox and tool context per test, with a small workspace in it."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from kag.core.plugins import Plugins
from kag.core.agent.toolkit import ToolContext, build_tools
from kag.plugins.sandboxes.local import LocalSandbox


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "utils").mkdir(parents=True)
    (ws / "kernels").mkdir()
    (ws / "SKILL.md").write_text("# skill\n")
    (ws / "model.py").write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    (ws / "utils" / "compile.sh").write_text("#!/bin/bash\necho compiled\n")
    (ws / "kernels" / "add.cu").write_text("__global__ void add(float* x) {\n  x[0] += 1.0f;\n}\n")
    (ws / "notes.txt").write_text("alpha\nbeta\ngamma\nbeta again\n")
    return ws


@pytest.fixture
def ctx(workspace: Path) -> Iterator[ToolContext]:
    handle = LocalSandbox(timeout_s=60).start(workspace)
    context = ToolContext.from_sandbox(handle)
    yield context
    context.close()
    handle.close()


@pytest.fixture(scope="session")
def tools() -> dict:
    return build_tools(Plugins(load_entrypoints=False))
