"""C++ ``torch::`` calls from a built binding pass through the dispatcher, so the profiler that
observes every call records them and the no-torch-fallback guard reports them (real build, CPU)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.adversarial.cases import CASES_DIR, load_solution

SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
    import torch
    import model_new
    from kag.core.eval.orchestrator.guarding import RunInfo
    from kag.core.eval.candidate.observe import CallObserver
    from kag.plugins.guards.torch_fallback import NoTorchFallback
    m = model_new.ModelNew()
    x = torch.randn(64, 64)
    obs = CallObserver("cpu")
    obs.start()
    with torch.no_grad(), obs.call():
        out = m(x)
    found = NoTorchFallback().check_observations(obs.stop(), RunInfo())
    print(json.dumps({"ok": bool(torch.equal(out, torch.relu(x))), "found": [v.detail for v in found]}))
""")


@pytest.mark.slow
def test_cpp_torch_call_is_seen_at_runtime(tmp_path: Path) -> None:
    build = pytest.importorskip("kag.core.eval.orchestrator.build")
    solution_dir = CASES_DIR / "cpp_torch_call" / "cpu"
    from tests.adversarial.conftest import guard_plugins

    backend = guard_plugins().create("backend", "cpu")
    result = build.build_solution(load_solution(solution_dir), backend, tmp_path / "build", timeout_s=300)
    assert result.ok, result.log
    proc = subprocess.run([sys.executable, "-c", SCRIPT, result.module_dir, str(solution_dir)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["ok"]
    assert any("aten::relu" in d or "aten::clamp_min" in d for d in report["found"]), report["found"]
