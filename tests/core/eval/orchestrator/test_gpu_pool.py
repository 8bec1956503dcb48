"""Deciding the backend without importing torch (kag.core.eval.orchestrator.gpu_pool.cuda_usable)."""

import subprocess
import sys


def test_cuda_usable_matches_torch_and_imports_nothing_heavy():
    code = ("import sys; from kag.core.eval.orchestrator.gpu_pool import cuda_usable, torch_cuda_version; "
            "usable = cuda_usable(); version = torch_cuda_version(); "
            "print(usable, version is None, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    import torch

    assert out[0] == str(torch.cuda.is_available())
    assert out[1] == str(torch.version.cuda is None)
    if torch.version.cuda is None:  # a CPU build: torch/version.py alone answers
        assert out[2] == "False"


def test_pick_backend_decides_auto_only(monkeypatch):
    from kag.core.eval.orchestrator import gpu_pool

    monkeypatch.setattr(gpu_pool, "cuda_usable", lambda: True)
    assert gpu_pool.pick_backend("auto") == "cuda"
    monkeypatch.setattr(gpu_pool, "cuda_usable", lambda: False)
    assert gpu_pool.pick_backend("auto") == "cpu"
    assert gpu_pool.pick_backend("cuda") == "cuda"  # a named backend is never second-guessed
