"""The example plugin's evaluation kinds (examples/plugins/kag-example-plugin/kag_example_plugin/evaluation.py),
pip-installed and found by entry point, each run where kag runs it: the tolerance and the baseline in the
judge's own process, the backend's compiler command, the sandbox's commands, the executor's processes,
the command on kag's command line."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import run_with_plugin
from tests.conftest import run_kag

ROOT = Path(__file__).resolve().parents[2]


def test_the_tolerance_and_the_baseline_run_in_the_judge(example_plugin):
    """An output 5e-3 off everywhere: within the paper's 1e-2, outside the example's 1e-3 for fp32.
    The example baseline is timed beside eager, in the judge's process."""
    out = run_with_plugin('''
        from kag.plugin import EvalOptions, Solution, Task, evaluate
        code = """
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                return torch.tanh(x)
        def get_inputs():
            return [torch.randn(64, 256)]
        def get_init_inputs():
            return []
        """
        off = code.replace("class Model", "class ModelNew").replace("torch.tanh(x)", "torch.tanh(x) + 5e-3")
        task = Task(name="tanh", source="test", code=code)
        for tolerance in ("cuda-agent", "example-half-aware"):
            opts = EvalOptions(backend="cpu", tolerance=tolerance, baselines=("eager", "example-inference"),
                               guards=(), num_timed=3, warmup=1)
            r = evaluate(task, Solution(model_new=off), opts)
            print(tolerance, r.correct, sorted(r.times_ms), (r.error or "").splitlines()[:1])
    ''', example_plugin)
    paper, example = out.strip().splitlines()
    assert paper.startswith("cuda-agent True ['candidate', 'eager', 'example-inference']"), out
    assert example.startswith("example-half-aware False ['candidate', 'eager', 'example-inference']") \
        or example.startswith("example-half-aware False []"), out
    assert "check 1 of" in example, out


def test_the_backend_compiles_a_kernel_for_the_generic_target(example_plugin, tmp_path):
    out = run_with_plugin(f'''
        import subprocess
        from kag.plugin import Backend, Plugins
        backend = Plugins().create("backend", "example-cpu-portable")
        assert isinstance(backend, Backend) and backend.device == "cpu"
        print(backend.source_kind("kernels/relu.cpp"), backend.source_kind("kernels/relu_binding.cpp"))
        cmd = backend.compile_command("kernel", "{ROOT}/examples/relu/cpu/kernels/relu.cpp", "{tmp_path}/relu.o")
        assert not any(f.startswith("-march") for f in cmd), cmd
        subprocess.run(cmd, check=True, cwd="{tmp_path}")
        print(backend.toolchain_id())
        try:
            backend.source_kind("kernels/relu.cu")
        except Exception as exc:
            print(type(exc).__name__)
    ''', example_plugin)
    kinds, toolchain, refused = out.strip().splitlines()
    assert kinds == "kernel binding" and (tmp_path / "relu.o").stat().st_size > 0
    assert toolchain.startswith("example-cpu-portable|") and "torch" in toolchain
    assert refused == "BuildSetupError"


def test_the_sandbox_runs_commands_in_a_copy_without_network_or_secrets(example_plugin, tmp_path):
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "kernels" / "a.cpp").write_text("int a;\n")
    out = run_with_plugin(f'''
        from kag.plugin import Plugins, Sandbox, SandboxHandle
        sandbox = Plugins().create("sandbox", "example-prefixed")
        assert isinstance(sandbox, Sandbox)
        handle = sandbox.start("{ws}", "{tmp_path}/bridge")
        assert isinstance(handle, SandboxHandle) and handle.workdir != "{ws}"
        r = handle.run("echo hi > kernels/b.txt && cat kernels/a.cpp && tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' && echo key=$OPENAI_API_KEY "
                       "&& echo bridge=$KAG_BRIDGE")
        print(repr(r.stdout), r.returncode)
        slow = handle.run("sleep 30", timeout=0.5)
        print(slow.timed_out, slow.elapsed_s < 10)
        print(handle.path("kernels/b.txt").read_text().strip())
        root = handle.path()
        handle.close()
        print(root.exists())
    ''', {**example_plugin, "OPENAI_API_KEY": "sk-never-in-the-sandbox"})
    lines = out.strip().splitlines()
    assert lines[0] == repr(f"int a;\nlo\nkey=\nbridge={tmp_path}/bridge/eval.sock\n") + " 0", lines[0]
    assert lines[1:] == ["True True", "hi", "False"]
    assert not (ws / "kernels" / "b.txt").exists()  # the episode wrote in its copy


def test_the_executor_runs_each_job_in_another_process(example_plugin):
    out = run_with_plugin('''
        import os
        from kag.plugin import Executor, Job, Plugins
        executor = Plugins().create("executor", "example-processes")
        assert isinstance(executor, Executor)
        jobs = [Job("a", "os:getpid"), Job("b", "os:getpid"), Job("bad", "json:loads", {"s": "{"})]
        got = {o.key: o for o in executor.map_unordered(jobs, workers=2)}
        print(all(got[k].value not in (None, os.getpid()) for k in "ab"), got["bad"].error.split(":")[0])
        with executor.session(workers=1) as session:
            print(session.call(Job("c", "os:getpid")).value != os.getpid(), executor.stats.jobs)
    ''', example_plugin)
    assert out.split() == ["True", "JSONDecodeError", "True", "1"], out


def test_the_command_lists_every_tolerance(example_plugin):
    proc = run_kag("example-tolerances", env=example_plugin)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(": ", 1) for line in proc.stdout.strip().splitlines())
    assert lines["example-half-aware"].startswith("float32=(0.001, 0.001) float16=(0.02, 0.02)")
    assert lines["cuda-agent"].startswith("float32=(0.01, 0.01)")
