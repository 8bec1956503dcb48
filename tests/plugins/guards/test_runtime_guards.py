"""Runtime guards on CPU with real torch: each ``check_forward`` around a small module's forward.

The module code lives in a real file named model_new.py so violations name its lines.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from kag.core.guarding import (ForwardInfo, compare_identities, count_poison, describe_types, poison_allocator,
                               run_runtime_guards, snapshot_identities)
from kag.plugins.guards.hidden_work import NoHiddenWork
from kag.plugins.guards.output_reuse import NoOutputReuse
from kag.plugins.guards.precision import PrecisionPolicy
from kag.plugins.guards.provenance import KernelProvenance
from kag.plugins.guards.tampering import NoTampering
from kag.plugins.guards.torch_fallback import ALLOWED_OPS, NoTorchFallback

_counter = 0


def load(tmp_path: Path, body: str):
    """Import ``body`` as a module from tmp_path/<unique>/model_new.py."""
    global _counter
    _counter += 1
    d = tmp_path / f"m{_counter}"
    d.mkdir()
    (d / "model_new.py").write_text("import torch\n" + textwrap.dedent(body))
    spec = importlib.util.spec_from_file_location(f"model_new_{_counter}", d / "model_new.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


X = torch.randn(64, 32)


def run(guard, fn, info=None):
    with torch.no_grad():
        return guard.check_forward(fn, info or ForwardInfo())


# -- no-torch-fallback --------------------------------------------------------------------
def test_fallback_reports_op_and_model_new_line(tmp_path):
    m = load(tmp_path, "def f(x):\n    y = x + 1\n    return torch.relu(y)\n")
    out, found = run(NoTorchFallback(), lambda: m.f(X))
    assert torch.equal(out, torch.relu(X + 1))
    details = [v.detail for v in found]
    assert any("model_new.py:3" in d and "aten::add" in d for d in details), details  # line 1: import torch
    assert any("model_new.py:4" in d and "aten::relu" in d for d in details), details
    assert len(found) == 2, details
    assert all(v.guard == "no-torch-fallback" for v in found)


def test_fallback_allows_allocation_fills_views_and_noop_contiguous(tmp_path):
    m = load(tmp_path, """
        def f(x):
            a = torch.empty_like(x); b = torch.zeros(4, 4); c = torch.ones_like(x); b.fill_(2.0); a.zero_()
            d = x.view(-1).reshape(x.shape).t().transpose(0, 1).unsqueeze(0).squeeze(0)
            e = x[1:3].contiguous().t().t().contiguous()  # already contiguous: no copy
            n = x.size(0) + x.stride(0) + x.numel() + x.dim()
            return x.expand(2, *x.shape)[0].detach().narrow(0, 0, 2).as_strided((2,), (1,))
        """)
    _, found = run(NoTorchFallback(), lambda: m.f(X))
    assert found == []


@pytest.mark.parametrize("body,op", [
    ("return x.t().contiguous()", "aten::clone"),  # contiguous that copies
    ("return x.t().reshape(-1)", "aten::clone"),  # reshape that is not a view
    ("return x.to(torch.float64)", "aten::_to_copy"),
    ("return torch.ops.aten.relu.default(x)", "aten::relu"),
    ("return torch.nn.functional.gelu(x)", "aten::gelu"),
    ("return x @ x.t()", "aten::mm"),
    ("return x.sum().item()", "aten::sum"),
])
def test_fallback_flags_compute(tmp_path, body, op):
    m = load(tmp_path, f"def f(x):\n    {body}\n")
    _, found = run(NoTorchFallback(), lambda: m.f(X))
    assert any(op in v.detail and "model_new.py:3" in v.detail for v in found), [v.detail for v in found]


def test_allow_list_is_explicit():
    for op in ("empty", "empty_like", "empty_strided", "zeros", "fill_", "view", "permute", "as_strided",
               "transpose", "unsqueeze", "squeeze", "expand", "select", "slice", "t", "detach", "alias"):
        assert op in ALLOWED_OPS
    for op in ("clone", "copy_", "add", "mul", "relu", "mm", "addmm", "convolution", "_to_copy", "contiguous",
               "_local_scalar_dense", "sum"):
        assert op not in ALLOWED_OPS


@pytest.mark.slow
def test_fallback_flags_torch_compile(tmp_path):
    m = load(tmp_path, "_c = torch.compile(lambda t: t * 2 + 1, backend='eager')\ndef f(x):\n    return _c(x)\n")
    m.f(X)
    _, found = run(NoTorchFallback(), lambda: m.f(X))
    assert any("torch.compile" in v.detail for v in found), [v.detail for v in found]


# -- kernel-provenance ----------------------------------------------------------------------
def test_provenance_reports_nothing_on_cpu(tmp_path):
    out, found = run(KernelProvenance(), lambda: torch.relu(X), ForwardInfo(device="cpu"))
    assert found == [] and torch.equal(out, torch.relu(X))


# -- no-output-reuse ----------------------------------------------------------------------
class Cached(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None

    def forward(self, x):
        if self.out is None:
            self.out = x.clamp(min=0)
        return self.out


def reuse_info(model, x):
    other = torch.randn_like(x)
    return ForwardInfo(alternate_call=lambda: (x.copy_(other), model(x))[1], reference_outputs_differ=True)


def test_output_reuse_flags_cached_output():
    x = X.clone()
    model = Cached()
    _, found = run(NoOutputReuse(), lambda: model(x), reuse_info(model, x))
    assert any("identical outputs" in v.detail for v in found)


def test_output_reuse_passes_honest_and_respects_reference():
    x = X.clone()
    model = torch.nn.ReLU()
    _, found = run(NoOutputReuse(), lambda: model(x), reuse_info(model, x))
    assert found == []
    cached = Cached()
    info = reuse_info(cached, x)
    info.reference_outputs_differ = False  # constant task: identical outputs are right
    assert run(NoOutputReuse(), lambda: cached(x), info)[1] == []


def test_poison_pattern_is_found_in_unwritten_memory():
    t = torch.empty(1000, dtype=torch.float32)
    t.view(torch.int32).fill_(0x7FC0DEAD)
    assert count_poison(t) == 1000
    assert count_poison(torch.full((10,), float("nan"))) == 0  # a computed NaN is not the poison
    poison_allocator([t])  # runs on every size/dtype without error
    poison_allocator([torch.empty(3, dtype=torch.float16), torch.empty(2, dtype=torch.float64)])


# -- no-hidden-work -----------------------------------------------------------------------
def test_hidden_work_flags_thread_left_running():
    import threading

    stop = threading.Event()

    def forward():
        threading.Thread(target=stop.wait, daemon=True).start()
        return X.clone()

    try:
        _, found = run(NoHiddenWork(), forward)
    finally:
        stop.set()
    assert any("Python thread" in v.detail for v in found)


def test_hidden_work_flags_child_process():
    procs = []

    def forward():
        procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]))
        return X.clone()

    try:
        _, found = run(NoHiddenWork(), forward)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert any("child process" in v.detail for v in found)


class Lazy(torch.Tensor):
    pass


def test_hidden_work_flags_subclass_and_type_mismatch():
    _, found = run(NoHiddenWork(), lambda: [X.clone(), Lazy._make_subclass(Lazy, X.clone())])
    assert any("not exactly torch.Tensor" in v.detail and "output[1]" in v.detail for v in found)
    info = ForwardInfo(reference_output_types=describe_types(X))
    _, found = run(NoHiddenWork(), lambda: (X.clone(),), info)
    assert any("differ from the reference" in v.detail for v in found)


def test_hidden_work_passes_honest():
    info = ForwardInfo(reference_output_types=describe_types(X))
    assert run(NoHiddenWork(), lambda: torch.relu(X), info)[1] == []


# -- no-tampering -------------------------------------------------------------------------
def test_tampering_runtime_compares_identities():
    snap = snapshot_identities()  # as the candidate does before importing model_new
    original = time.perf_counter

    def forward():
        time.perf_counter = lambda: 0.0
        return X.clone()

    try:
        _, found = run(NoTampering(), forward, ForwardInfo(identity_snapshot=snap))
    finally:
        time.perf_counter = original
    assert any("time.perf_counter" in v.detail for v in found)
    assert compare_identities(snap) == []


def test_tampering_flags_new_tensor_method():
    snap = snapshot_identities()
    torch.Tensor.kag_test_evil = lambda self: self
    try:
        found = compare_identities(snap)
    finally:
        del torch.Tensor.kag_test_evil
    assert any("kag_test_evil" in v.detail for v in found)


# -- precision ----------------------------------------------------------------------------
def test_precision_runtime_flags_tf32_only_under_strict():
    def forward():
        torch.backends.cuda.matmul.allow_tf32 = True
        return X.clone()

    try:
        assert run(PrecisionPolicy(tolerance="cuda-agent"), forward)[1] == []
        found = run(PrecisionPolicy(tolerance="strict"), forward)[1]
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False
    assert any("allow_tf32" in v.detail for v in found)


def test_guard_options_are_validated():
    with pytest.raises(ValueError, match="tolerance"):
        PrecisionPolicy(tolerance="loose")
    with pytest.raises(TypeError):
        NoTampering(colour="red")


# -- all together -------------------------------------------------------------------------
def all_guards():
    return [NoTorchFallback(), KernelProvenance(), NoOutputReuse(), NoHiddenWork(), NoTampering(),
            PrecisionPolicy(tolerance="strict")]


def test_run_runtime_guards_honest_module_passes():
    x = X.clone()
    model = torch.nn.Identity()  # no ATen compute at all; the alternate call refills x in place
    info = reuse_info(model, x)
    info.identity_snapshot, info.reference_output_types = snapshot_identities(), describe_types(x)
    with torch.no_grad():
        out, found = run_runtime_guards(all_guards(), lambda: model(x), info)
    assert found == [] and isinstance(out, torch.Tensor)


def test_run_runtime_guards_collects_every_guard():
    x = X.clone()
    model = Cached()
    info = reuse_info(model, x)
    with torch.no_grad():
        _, found = run_runtime_guards(all_guards(), lambda: model(x), info)
    guards = {v.guard for v in found}
    assert {"no-torch-fallback", "no-output-reuse"} <= guards
