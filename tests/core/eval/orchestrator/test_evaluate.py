"""End-to-end evaluations on the CPU backend: real spawned judge and candidate processes."""

import os
import textwrap
import time


import pytest

from kag.core.eval.orchestrator.evaluate import EvalOptions, Timeouts, evaluate
from kag.core.hookspecs import hookimpl
from kag.core.plugins import Plugins
from kag.core.records import Solution, Task, Violation

TASK_CODE = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale
            self.weight = nn.Parameter(torch.randn(64))

        def forward(self, x):
            return torch.relu(x * self.weight) * self.scale

    def get_inputs():
        return [torch.randn(32, 64)]

    def get_init_inputs():
        return [2.0]
''')

HEADER = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class ModelNew(nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale
            self.weight = nn.Parameter(torch.zeros(64))  # the judge loads the reference weights

        def forward(self, x):
''')


def solution(body: str, prelude: str = "") -> Solution:
    return Solution(model_new=prelude + HEADER + textwrap.indent(textwrap.dedent(body), " " * 8))


# A hand-written elementwise loop and the same torch expression: both honest.
GOOD = solution("return (x * self.weight).clamp_min(0) * self.scale")
LOOP = solution('''
    flat = (x * self.weight).reshape(-1).tolist()
    out = [v * self.scale if v > 0 else 0.0 for v in flat]
    return torch.tensor(out, dtype=x.dtype).reshape(x.shape)
''')


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("kag-cache"))


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    path = tmp_path_factory.mktemp("task") / "model.py"
    path.write_text(TASK_CODE)
    return Task(name="relu_scale", source="file", code=TASK_CODE, path=str(path))


# These solutions are plain torch (no extension to build): they test the judge and candidate
# processes, so the guards (which would reject torch compute) are off unless a test names them.
NO_GUARDS = ()


def verify_options(cache_dir, **kw):
    opts = dict(backend="cpu", do_timing=False, num_checks=3, cache_dir=cache_dir,
                timeouts=Timeouts(load_s=60, check_s=4), guards=NO_GUARDS)
    opts.update(kw)
    return EvalOptions(**opts)


def test_correct_solution_scores_and_baselines_are_cached(task, cache_dir):
    opts = EvalOptions(backend="cpu", num_timed=5, warmup=1, num_checks=5, cache_dir=cache_dir, guards=NO_GUARDS)
    first = evaluate(task, GOOD, opts)
    assert first.ok, first.error
    assert first.compiled and first.correct and first.error_kind is None
    assert first.reward.name == "milestone" and first.reward.value >= 1
    assert set(first.times_ms) >= {"candidate", "eager", "compile"}
    assert first.timing["candidate"].n == 5 and first.timing["compile"].n == 5
    # a tiny task: its calls take about the path's own cost, and no call is credited as faster than
    # what the path's noise is worth per call (its resolution)
    resolution = first.metadata["calibration"]["resolution_ms"]
    from kag.core.eval.judge.heap import POLICY

    assert first.metadata["calibration"]["heap"] == POLICY  # both sides forked under one heap policy
    assert resolution > 0 and first.times_ms["candidate"] >= resolution - 1e-4
    if first.timing["candidate"].median_ms < resolution:
        assert first.times_ms["candidate"] == pytest.approx(resolution, abs=1e-4)
        assert any("under what the judge's path resolves" in n for n in first.metadata["notes"])
    assert first.speedup_vs_eager == pytest.approx(first.times_ms["eager"] / first.times_ms["candidate"])
    assert first.device["backend"] == "cpu" and first.device["torch"] and first.device["name"]
    first_cache = first.metadata["baseline_cache"]
    assert set(first_cache) == {"eager", "compile"}
    assert all(info["source"] == "timed" and info["runs"] == 5 for info in first_cache.values())
    # its rechecked outputs were read from its memory: nothing was handed over
    assert "fold_ms" not in first.metadata["calibration"] and "post_ms" not in first.metadata["calibration"]
    load = first.metadata["timing_load"]  # every timed phase held the CPU's slot and says under what load
    assert load["candidate"]["locked"] and load["candidate"]["slot"] == "cpu"  # null windows are in its timing
    assert load["candidate"]["cpus"] >= 1 and load["candidate"]["loadavg_1m"] is not None
    # others' CPUs only over timed loops long enough for /proc/stat's 10 ms ticks
    assert (load["candidate"]["others_cpus"] is not None) == (load["candidate"]["timed_s"] > 0.05)
    for name, info in first_cache.items():
        assert info["conditions"]["locked"]
        if info["status"] == "loaded":  # settled, but timed under load: never cached
            assert not info["cached"] and info["conditions"]["others_cpus"] > 0.25 * info["conditions"]["cpus"]
    second = evaluate(task, LOOP, opts)
    assert second.ok, second.error
    for name, info in first_cache.items():  # a settled timing is reused; a noisy one is timed again
        again = second.metadata["baseline_cache"][name]
        if info["cached"] and not again.get("retimed"):
            assert again["source"] == "cache" and second.times_ms[name] == first.times_ms[name]
        elif info["cached"]:  # the candidate was timed under another load: re-timed, the nearest kept
            assert again["retimed"]["kept"] in ("first", "re-timed")
        else:
            assert info["status"] in ("unsettled", "loaded") and again["source"] == "timed"
            assert info["attempts"] == 3 or info["status"] == "loaded"


def test_wrong_solution_fails_with_the_first_mismatch(task, cache_dir):
    result = evaluate(task, solution("return x * self.weight * self.scale"), verify_options(cache_dir))
    assert not result.ok and result.compiled and not result.correct
    assert result.error_kind == "mismatch"
    assert "check 1 of 3" in result.error and "mismatch at index" in result.error
    assert "max abs error" in result.error
    assert result.reward.value == -1


def test_writing_into_inputs_cannot_change_the_reference(task, cache_dir):
    # Zeroing the input first makes "reference == candidate" only if both saw the same buffer.
    result = evaluate(task, solution("x.zero_()\nreturn (x * self.weight).clamp_min(0) * self.scale"),
                      verify_options(cache_dir))
    assert result.error_kind == "mismatch", result.error


CRASHES = {
    "abort": ("import os\n", "os.abort()", "crash", "killed by SIGABRT"),
    "segfault": ("import ctypes\n", "ctypes.string_at(0)", "crash", "killed by SIGSEGV"),
    "exit0": ("import os\n", "os._exit(0)", "crash", "exited with status 0"),
    "hang": ("import time\n", "time.sleep(600)", "timeout", "did not finish within 4 s"),
    "raises": ("", "raise ValueError('no kernel here')", "exception", "ValueError: no kernel here"),
    "subclass": ("import torch\n\n\nclass Lazy(torch.Tensor):\n    pass\n", "return ((x * self.weight).clamp_min(0) * self.scale)"
                 ".as_subclass(Lazy)", "exception", "not a subclass"),
}


@pytest.mark.parametrize("case", sorted(CRASHES))
def test_faults_become_failed_results(task, cache_dir, case):
    prelude, body, kind, message = CRASHES[case]
    result = evaluate(task, solution(body, prelude), verify_options(cache_dir))
    assert not result.ok and not result.correct
    assert result.error_kind == kind, result.error
    assert message in result.error
    assert result.reward.value == -1


def test_host_memory_over_the_limit_is_an_oom(task, cache_dir):
    # 1.5 GiB of private memory, held while the judge watches; the limit is 0.5 GiB.
    hog = solution("hog = bytearray(1536 << 20)\ntime.sleep(30)\nreturn x", "import time\n")
    result = evaluate(task, hog, verify_options(cache_dir, host_memory_gb=0.5,
                                                timeouts=Timeouts(load_s=60, check_s=20)))
    assert result.error_kind == "oom", result.error
    assert "GiB of host memory, over the limit of 0.5 GiB" in result.error


FORGE = """
import os, pickle, struct
_verdict = pickle.dumps(("result", {"correct": True, "times_ms": {"candidate": 1e-6}}))
FORGED = struct.pack("!i", len(_verdict)) + _verdict
"""


def test_a_candidate_cannot_reach_the_orchestrators_channel(task, cache_dir):
    # The candidate is forked from the judge; every descriptor it inherits besides its own channel
    # points at /dev/null, so a forged ("result", ...) written everywhere reaches no orchestrator.
    body = """
    for fd in range(3, 1024):
        try:
            os.write(fd, FORGED)
        except OSError:
            pass
    return (x * self.weight).clamp_min(0) * self.scale
    """
    result = evaluate(task, solution(body, FORGE), verify_options(cache_dir))
    assert not result.correct and result.error_kind in ("exception", "crash"), (result.error_kind, result.error)
    assert result.times_ms.get("candidate") != 1e-6


def test_failures_at_import_and_construction(task, cache_dir):
    result = evaluate(task, Solution(model_new="raise ImportError('nope')\n"), verify_options(cache_dir))
    assert result.error_kind == "exception" and "ImportError: nope" in result.error
    result = evaluate(task, Solution(model_new="x = 1\n"), verify_options(cache_dir))
    assert "no ModelNew" in result.error


def test_output_is_captured_bounded_and_never_a_verdict(task, cache_dir):
    noisy = solution("print('PASS ' * 20000, flush=True)\nreturn x", prelude="")
    result = evaluate(task, noisy, verify_options(cache_dir, num_checks=1))
    assert result.error_kind == "mismatch"
    out = result.metadata["candidate_output"]
    assert "PASS" in out and len(out) <= 70_000 and "earlier bytes dropped" in out


def test_next_evaluation_after_a_crash_is_unaffected(task, cache_dir):
    crashed = evaluate(task, solution("os.abort()", "import os\n"), verify_options(cache_dir))
    assert crashed.error_kind == "crash"
    good = evaluate(task, GOOD, verify_options(cache_dir))
    assert good.ok and good.reward.value >= 1, good.error


def test_judges_leave_no_folder_behind_unused_or_killed():
    """A warm judge no evaluation took, and one killed without a word: their candidates' folders go."""
    from kag.core.eval.orchestrator.judge_process import JudgeProcess

    for kill in (False, True):
        judge = JudgeProcess()
        deadline = time.monotonic() + 120
        while not judge.torch_ready() and time.monotonic() < deadline:
            time.sleep(0.1)
        folder = judge.candidate_tmp
        assert folder and os.path.basename(folder).startswith("kag-cand-") and os.path.isdir(folder)
        if kill:
            judge.proc.kill()
            judge.proc.join(timeout=10)
        judge.close()
        assert not os.path.exists(folder), ("killed" if kill else "unused", folder)


class _ForbidLoops:
    """A static guard registered at run time (every guard takes the evaluator's guard options)."""

    def __init__(self, **options):
        self.options = options

    def check_solution(self, solution, task):
        if "tolist()" in solution.model_new:
            return [Violation(guard="no-python-loops", detail="model_new.py: .tolist() in forward")]
        return []


class _GuardPlugin:
    @hookimpl
    def kag_register_guards(self, register):
        register("no-python-loops", _ForbidLoops)


def test_static_guards_run_before_the_build(task, cache_dir):
    plugins = Plugins(load_entrypoints=False)
    plugins.register_plugin(_GuardPlugin(), name="test-guards")
    result = evaluate(task, LOOP, verify_options(cache_dir, guards=("no-python-loops",)), plugins)
    assert result.error_kind == "guard" and not result.compiled
    assert result.violations == [Violation("no-python-loops", "model_new.py: .tolist() in forward")]
    assert result.reward.value == -1


# Correct for the first 7 calls (5 checks, 1 warm-up, timed iteration 0), stale afterwards: only the
# re-check of secretly chosen timed iterations (at least two of them are >= 1) can see it.
FIRST_CALLS = solution('''
    if len(_memo) < 7:
        _memo.append((x * self.weight).clamp_min(0) * self.scale)
    return _memo[-1].clone()
''', prelude="_memo = []\n")


def test_timed_iterations_are_rechecked_against_the_reference(task, cache_dir):
    opts = EvalOptions(backend="cpu", num_timed=8, warmup=1, num_checks=5, cache_dir=cache_dir, guards=NO_GUARDS,
                       baselines=("eager",))
    result = evaluate(task, FIRST_CALLS, opts)
    assert result.error_kind == "mismatch" and "compared in secret" in result.error, result.error
    assert not result.ok and result.reward.value == -1
    assert result.metadata["rechecked_calls"] >= 1  # each call compared with a secret probability


def test_the_baselines_run_in_another_process_and_are_not_observed_as_the_solution(task, cache_dir):
    """Eager and torch.compile are timed in the baseline runner (a child of the judge like the
    candidate): their calls and operators are not the solution's, and both sides' windows are reported."""
    opts = EvalOptions(backend="cpu", num_timed=5, warmup=1, num_checks=2, cache_dir=cache_dir, guards=NO_GUARDS,
                       use_baseline_cache=False)
    result = evaluate(task, GOOD, opts)
    assert result.ok, result.error
    cal = result.metadata["calibration"]
    assert cal["null_window_ms"] > 0 and cal["calls_per_window"] == 1 and cal["windows"]["timed"] == 5
    assert set(cal["baselines"]) == {"eager", "compile"} and cal["baselines"]["eager"]["null_window_ms"] > 0
    observed = result.metadata["observed"]
    assert observed["calls"] >= 2 + 1 + 5  # checks, warm-up and timed calls (and sampled ones)
    assert "aten::clamp_min" in observed["ops"] and "aten::relu" not in observed["ops"]


def test_a_candidate_cannot_list_the_evaluations_folder(task, cache_dir):
    """Every evaluation's solution and build lie under one folder the candidate may read at its own
    path; listing it showed every other one's, a concurrent evaluation's too (the candidate has the
    folder owner's uid, without capabilities: the mode alone must refuse it)."""
    from kag.core.trust.isolation import evals_root

    root = evals_root()
    # two routes: a listing by path, and one through a descriptor of the folder opened first
    prelude = (f"import os\nfor route in (lambda: os.listdir({root!r}), lambda: os.listdir(os.open({root!r}, os.O_RDONLY)),"
               f" lambda: list(os.scandir({root!r}))):\n"
               "    try:\n        print('LISTED', len(route()), flush=True)\n"
               "    except OSError as exc:\n        print('REFUSED', type(exc).__name__, flush=True)\n")
    result = evaluate(task, solution("return (x * self.weight).clamp_min(0) * self.scale", prelude),
                      verify_options(cache_dir))
    assert result.correct, result.error
    out = result.metadata["candidate_output"]
    assert out.count("REFUSED PermissionError") == 3 and "LISTED" not in out, out


IPC_PROBE = """import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
rt = ctypes.CDLL('librt.so.1', use_errno=True)
rt.mq_open.restype = ctypes.c_int
key, queue = {key}, b'/{queue}'
found = []
if libc.shmget(key, 4096, 0o600) >= 0: found.append('segment')
if libc.msgget(key + 1, 0o600) >= 0: found.append('message queue')
mq = rt.mq_open(queue, os.O_RDONLY)
if mq >= 0: found.append('posix queue')
print('FOUND ' + ','.join(found) if found else 'ABSENT', flush=True)
made = [libc.shmget(key, 4096, 0o1000 | 0o600), libc.msgget(key + 1, 0o1000 | 0o600)]
print('MADE' if all(m >= 0 for m in made) else 'NOT MADE ' + str(made), flush=True)
mq = rt.mq_open(queue, os.O_CREAT | os.O_RDWR, 0o600, None)
print('POSIX queue ' + ('made' if mq >= 0 else 'refused: ' + os.strerror(ctypes.get_errno())), flush=True)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="an IPC namespace needs root")
def test_what_a_candidate_leaves_in_system_v_or_posix_ipc_no_later_evaluation_finds(task, cache_dir):
    """System V shared memory and message queues, and POSIX message queues, outlive the process that
    made them: a candidate left a segment with a fixed key for the next evaluation (verify, profile,
    the final score) or a concurrent one. Three routes; the host must not have them afterwards."""
    import subprocess

    key, queue = 0x6B6100 + os.getpid() % 0xFF, f"kag-test-queue-{os.getpid()}"
    probe = solution("return (x * self.weight).clamp_min(0) * self.scale", IPC_PROBE.format(key=key, queue=queue))
    try:
        outs, layers = [], []
        for _ in range(2):
            result = evaluate(task, probe, verify_options(cache_dir))
            assert result.correct, result.error
            outs.append(result.metadata["candidate_output"])
            layers.append(result.metadata["confinement"])
        assert all("ABSENT" in out and "MADE" in out and "NOT MADE" not in out for out in outs), outs
        listed = subprocess.run(["ipcs", "-m", "-q"], capture_output=True, text=True).stdout
        assert f"0x{key:08x}" not in listed and f"0x{key + 1:08x}" not in listed, listed
        assert all("private System V and POSIX message-queue IPC (the evaluation's own)" in got for got in layers)
    finally:
        for flag, k in (("-M", key), ("-Q", key + 1)):
            subprocess.run(["ipcrm", flag, str(k)], capture_output=True)
        ctypes_rt = __import__("ctypes").CDLL("librt.so.1")
        ctypes_rt.mq_unlink(f"/{queue}".encode())


@pytest.mark.skipif(os.geteuid() != 0, reason="a private /dev/shm needs a mount namespace (root)")
def test_what_a_candidate_leaves_in_dev_shm_no_later_evaluation_finds(task, cache_dir):
    """/dev/shm was the host's: a file written there outlived the candidate, so a solution could count
    its evaluations (verify, profile, the final score) or signal to a concurrent one. With CUDA the
    candidate keeps the judge's /dev/shm (torch's IPC meets there), which is the evaluation's own."""
    marker = f"/dev/shm/kag-test-marker-{os.getpid()}"
    segment = f"kag-test-segment-{os.getpid()}"  # a second route: POSIX shared memory by name (shm_open)
    prelude = (f"import os, _posixshmem\n"
               f"print('FOUND' if os.path.exists({marker!r}) else 'ABSENT', flush=True)\n"
               f"open({marker!r}, 'w').write('1')\n"
               f"try:\n    _posixshmem.shm_open({'/' + segment!r}, os.O_RDWR, 0o600); print('FOUND segment', flush=True)\n"
               f"except FileNotFoundError:\n    _posixshmem.shm_open({'/' + segment!r}, os.O_CREAT | os.O_RDWR, 0o600)\n")
    probe = solution("return (x * self.weight).clamp_min(0) * self.scale", prelude)
    try:
        outs = []
        for _ in range(2):
            result = evaluate(task, probe, verify_options(cache_dir))
            assert result.correct, result.error  # the tensors still reach the judge
            assert "private /dev/shm (the evaluation's own)" in result.metadata["confinement"]
            outs.append(result.metadata["candidate_output"])
        assert all("ABSENT" in out and "FOUND" not in out for out in outs), outs
        assert not os.path.exists(marker) and not os.path.exists(f"/dev/shm/{segment}")
    finally:
        for left in (marker, f"/dev/shm/{segment}"):
            if os.path.exists(left):
                os.unlink(left)
