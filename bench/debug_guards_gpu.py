"""Find which runtime guard stalls on CUDA: run each guard's check_forward in-process on a built
example with a watchdog that prints every thread's stack. Usage: python bench/debug_guards_gpu.py"""

import faulthandler
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from kag.core.eval.build import build_solution  # noqa: E402
from kag.core.eval.guarding import ForwardInfo, describe_types, run_runtime_guards, snapshot_identities  # noqa: E402
from kag.core.plugins import Plugins  # noqa: E402
from kag.core.tasks import load_module  # noqa: E402
from kag.core.agent.workspace import read_solution  # noqa: E402

name = sys.argv[1] if len(sys.argv) > 1 else "diag_matmul"
ex = REPO / "examples" / name
task_code = (REPO / ".kb" / (ex / "task.txt").read_text().strip()).read_text()
plugins = Plugins()
out = Path("/tmp/dbg") / name
res = build_solution(read_solution(ex / "cuda"), plugins.create("backend", "cuda"), out)
print("build", res.ok, res.seconds, flush=True)
snap = snapshot_identities()
sys.path.insert(0, str(out))
import cuda_extension  # noqa: E402,F401

ns = load_module(task_code, "model.py")
mn = load_module((ex / "cuda" / "model_new.py").read_text(), str(ex / "cuda" / "model_new.py"))
torch.manual_seed(0)
with torch.device("cuda"):
    model = mn["ModelNew"](*ns["get_init_inputs"]())
    ref = ns["Model"](*ns["get_init_inputs"]())
    inputs = ns["get_inputs"]()
    alt = ns["get_inputs"]()
so = next(out.glob("cuda_extension*.so"))
info = ForwardInfo(device="cuda", extension_path=str(so), solution_dir=str(ex / "cuda"),
                   reference_output_types=describe_types(ref(*inputs)), identity_snapshot=snap,
                   alternate_call=lambda: ([a.copy_(b) for a, b in zip(inputs, alt)], model(*inputs))[1])
for gname in plugins.selected_all("guard"):
    guard = plugins.create("guard", gname)
    if not hasattr(guard, "check_forward"):
        continue
    faulthandler.dump_traceback_later(40, exit=False)
    t0 = time.perf_counter()
    with torch.no_grad():
        _, found = run_runtime_guards([guard], lambda: model(*inputs), info)
    torch.cuda.synchronize()
    faulthandler.cancel_dump_traceback_later()
    print(f"guard {gname}: {time.perf_counter() - t0:.2f} s, violations {[str(v.detail)[:120] for v in found]}", flush=True)
faulthandler.dump_traceback_later(60, exit=True)
t0 = time.perf_counter()
guards = [plugins.create("guard", g) for g in plugins.selected_all("guard")]
with torch.no_grad():
    _, found = run_runtime_guards([g for g in guards if hasattr(g, "check_forward")], lambda: model(*inputs), info)
print(f"all guards nested: {time.perf_counter() - t0:.2f} s, violations {[str(v.detail)[:120] for v in found]}", flush=True)
