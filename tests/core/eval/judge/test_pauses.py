"""What is checked leaves no trace: a candidate that times the gap before each of its calls
(its monotonic clock runs while it is stopped) cannot tell a call whose output the judge compared
from one it did not. Over 1000 calls on the CPU, the gaps after compared calls and after the others
come from one distribution (a two-sample Kolmogorov-Smirnov test, and their medians within noise)."""

from __future__ import annotations

import json
import statistics
import textwrap

import pytest

from kag.core.eval.orchestrator.evaluate import EvalOptions, evaluate
from kag.core.records import Solution, Task

TASK = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)

    def get_inputs():
        return [torch.randn(1024, 1024)]

    def get_init_inputs():
        return []
''')

# plain torch (this test is about pauses, not kernels: the fallback guard is off), and it prints,
# per call, the gap since its last call ended, on its own clock
SPY = textwrap.dedent('''
    import time
    import torch
    import torch.nn as nn

    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.last = None
            self.gaps = []

        def forward(self, x):
            now = time.monotonic()
            self.gaps.append(-1.0 if self.last is None else now - self.last)
            if len(self.gaps) % 100 == 0:
                print("GAPS", " ".join(f"{g:.6f}" for g in self.gaps[-100:]), flush=True)
            out = torch.relu(x)
            self.last = time.monotonic()
            return out
''')


def ks_statistic(a: list[float], b: list[float]) -> float:
    """The two-sample Kolmogorov-Smirnov statistic (the largest gap between the two empirical CDFs)."""
    both = sorted(set(a) | set(b))
    sa, sb = sorted(a), sorted(b)
    import bisect

    return max(abs(bisect.bisect_right(sa, x) / len(sa) - bisect.bisect_right(sb, x) / len(sb)) for x in both)


def test_a_pause_says_nothing_of_whether_the_last_call_was_compared(tmp_path):
    task = Task(name="relu1024", source="test", code=TASK, path=str(tmp_path / "task.py"))
    options = EvalOptions(backend="cpu", num_timed=1000, warmup=1, num_checks=2, baselines=(), guards=(),
                          cache_dir=str(tmp_path / "cache"))
    for _ in range(3):  # the number of compared calls is itself secret (12-24 expected): too few to test, again
        result = evaluate(task, Solution(model_new=SPY), options)
        assert result.ok, result.error
        gaps: list[float] = []
        for line in result.metadata["candidate_output"].splitlines():
            if line.startswith("GAPS "):
                gaps += [float(g) for g in line.split()[1:]]
        compared = set(result.metadata["calibration"]["compared_calls"])
        if len(compared) >= 10:
            break
    assert len(gaps) >= 1000 and len(compared) >= 10, (len(gaps), len(compared))
    # the gap before call i+1 follows call i; the first calls are the checks (all compared, before any
    # padding) and the first estimate's windows: the timing's gaps start after them
    start = max(compared_checks(result), 8)
    after_compared = [gaps[i + 1] for i in range(start, len(gaps) - 1) if i in compared]
    after_others = [gaps[i + 1] for i in range(start, len(gaps) - 1) if i not in compared]
    assert len(after_compared) >= 8, len(after_compared)
    d = ks_statistic(after_compared, after_others)
    n, m = len(after_compared), len(after_others)
    critical = 1.95 * ((n + m) / (n * m)) ** 0.5  # alpha = 0.001
    assert d < critical, (d, critical, statistics.median(after_compared), statistics.median(after_others))
    # the medians of the gaps of one pause (a gap spanning null windows is two or three; which of those
    # modes the dozen compared gaps fall in is chance, and a median of them jumps by a whole pause)
    one = 1.5 * result.metadata["calibration"]["pause_ms"] / 1e3
    single_compared = [g for g in after_compared if g < one]
    single_others = [g for g in after_others if g < one]
    assert len(single_compared) >= 4, after_compared
    spread = statistics.pstdev(single_others)
    assert abs(statistics.median(single_compared) - statistics.median(single_others)) < max(spread, 1e-3), \
        json.dumps({"compared": sorted(single_compared), "others_median": statistics.median(single_others),
                    "spread": spread})


def compared_checks(result) -> int:
    return 2  # num_checks: the check window's calls, all compared, before the timing


BIG_TASK = TASK.replace("torch.randn(1024, 1024)", "torch.randn(3400, 3400)")  # 46 MB an output: too large to keep

# a solution that writes the right output on every call but one in four (an unwritten one then)
SKIPPER = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return torch.relu(x) if self.calls <= 2 or self.calls % 4 else torch.empty_like(x)
''')


@pytest.mark.slow  # 85 s on the 2-core VM: every pause compares 46 MB against the reference
def test_outputs_too_large_to_keep_are_compared_in_the_pause(tmp_path):
    """The path no other test takes: outputs too large to keep until the last window are compared in
    the pause after their window (where a decoy capture would have to cost a comparison, every slot
    is a real check: tests/core/eval/judge/test_judge_timing.py). An honest solution passes with its
    calls compared; one that leaves one output in four unwritten is caught."""
    task = Task(name="relu3400", source="test", code=BIG_TASK, path=str(tmp_path / "task.py"))
    options = EvalOptions(backend="cpu", num_timed=10, warmup=1, num_checks=2, baselines=(), guards=(),
                          cache_dir=str(tmp_path / "cache"))
    honest = evaluate(task, Solution(model_new=SPY), options)
    assert honest.ok, honest.error
    compared = honest.metadata["calibration"]["compared_calls"]
    assert len(compared) >= 10 and compared == sorted(set(compared)), compared
    skipper = evaluate(task, Solution(model_new=SKIPPER), options)
    assert not skipper.ok and "compared in secret" in skipper.error, skipper.error


# On a GPU a window holds many calls, and the judge reads (or decoy-reads) the same number of outputs after
# every window of a size; the spy prints the gaps that span a pause (its calls within a window are microseconds
# apart), each with the index of the call after it
GPU_TASK = TASK.replace("torch.randn(1024, 1024)", "torch.randn(4096, 4096)")
GPU_SPY = textwrap.dedent('''
    import time
    import torch
    import torch.nn as nn

    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.last = None
            self.calls = 0

        def forward(self, x):
            now = time.monotonic()
            if self.last is not None and now - self.last > 1e-3:
                print("PAUSE", self.calls, f"{now - self.last:.6f}", flush=True)
            self.calls += 1
            out = torch.relu(x)
            self.last = time.monotonic()
            return out
''')


def window_end_gaps(result) -> tuple[list[float], list[float]]:
    """The pause after each long window (the most calls between two pauses), split by whether one of its
    calls was compared."""
    compared = set(result.metadata["calibration"]["compared_calls"])
    pauses = [(int(line.split()[1]), float(line.split()[2]))
              for line in result.metadata["candidate_output"].splitlines() if line.startswith("PAUSE ")]
    windows = [(start, end, gap) for (start, _), (end, gap) in zip(pauses, pauses[1:])]
    longest = max(end - start for start, end, _ in windows)
    one = 1.5 * result.metadata["calibration"]["pause_ms"] / 1e3
    after = [(any(start <= c < end for c in compared), gap) for start, end, gap in windows
             if end - start == longest and gap < one]
    return [g for hit, g in after if hit], [g for hit, g in after if not hit]


@pytest.mark.gpu
def test_on_a_gpu_a_pause_says_nothing_of_whether_its_window_was_compared(tmp_path):
    """The same on a GPU: the pauses after long windows that held a compared call and after the others
    come from one distribution (KS at alpha 0.001, medians within the others' spread)."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    task = Task(name="relu4096", source="test", code=GPU_TASK, path=str(tmp_path / "task.py"))
    options = EvalOptions(backend="cuda", num_timed=600, warmup=1, num_checks=2, baselines=(), guards=(),
                          cache_dir=str(tmp_path / "cache"))
    for _ in range(3):
        result = evaluate(task, Solution(model_new=GPU_SPY), options)
        assert result.ok, result.error
        hit, others = window_end_gaps(result)
        if len(hit) >= 8:
            break
    assert len(hit) >= 8 and len(others) >= 50, (len(hit), len(others), result.metadata["calibration"])
    d = ks_statistic(hit, others)
    n, m = len(hit), len(others)
    critical = 1.95 * ((n + m) / (n * m)) ** 0.5
    summary = json.dumps({"d": d, "critical": critical, "compared": sorted(hit),
                          "others_median": statistics.median(others), "pause_ms": result.metadata["calibration"]["pause_ms"]})
    print("GPU pauses", summary)
    assert d < critical, summary
    spread = statistics.pstdev(others)
    assert abs(statistics.median(hit) - statistics.median(others)) < max(spread, 1e-4), summary
