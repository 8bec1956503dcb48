"""The window protocol between the judge and a child (kag.core.eval.judge.candidate_process and the
harness in kag.core.eval.candidate.candidate), driven directly on the CPU: windows of several calls rung
through the pipe and through the shared bell, each call on its own staged input set, the outputs
found in the stopped child's memory where the window's end says they are."""

from __future__ import annotations

import pytest
import torch

from kag.core.eval.boundary import EXTENT, COUNT
from kag.core.eval.judge.candidate_process import CandidateProcess
from kag.core.eval.judge.judge_calls import path_account
from kag.core.eval.boundary import CandidateSpec
from kag.core.records import to_dict

TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


def _runner(bell: bool, task: str = TASK) -> CandidateProcess:
    child = CandidateProcess(None, None)
    child.fast = bell
    child.exchange(("prepare", {"device": "cpu", "env": {}, "seccomp": False, "wall": None, "bell": bell}), 60,
                   "prepare", expect="prepared")
    spec = CandidateSpec(task_code=task, task_path="<task>", init_seed=0, model_new_path="")
    child.exchange(("baseline", {"spec": to_dict(spec), "name": "eager", "mode": "default"}), 60, "baseline",
                   expect="baseline")
    return child


@pytest.mark.parametrize("bell", [False, True], ids=["pipe", "bell"])
def test_a_window_of_calls_runs_each_on_its_set_and_says_where_the_outputs_are(bell):
    child = _runner(bell)
    try:
        reply, _ = child.exchange(("buffers", {"count": 5, "descr": {"seq": "list", "items": [
            {"shape": [4, 8], "stride": [8, 1], "dtype": "float32", "device": "cpu"}]}}), 60, "buffers",
            expect="buffers")
        sets = [list(s) for s in reply[1]]
        for window in range(3):  # several windows: the bell's words of one do not leak into the next
            calls = 5 - window
            inputs = [torch.randn(4, 8) for _ in range(calls)]
            for target, x in zip(sets, inputs):
                target[0].copy_(x)
            seconds = child.window(calls, 30, "test window")
            assert seconds > 0
            (n,) = COUNT.unpack_from(child.tail, 0)
            assert n == calls
            for j, x in enumerate(inputs):
                address, size = EXTENT.unpack_from(child.tail, COUNT.size + j * EXTENT.size)
                out = torch.frombuffer(bytearray(child.read_memory(address, size)), dtype=torch.float32).reshape(4, 8)
                assert torch.equal(out, torch.relu(x) * 2.0)
        assert child.window(0, 30, "null", null=True) > 0
    finally:
        child.close()


def test_a_candidate_forked_from_a_process_that_shares_tensors_still_sends_its_own():
    """A long-lived judge that has once sent a tensor by file descriptor runs multiprocessing's
    resource sharer; a candidate forked after that must serve its own tensors, not point the
    reader at the judge's sharer (the reply was unreadable: EOFError, in CI after other tests)."""
    from kag.core.eval.boundary import restricted_loads
    from kag.core.eval.candidate.channel import dumps

    assert torch.equal(restricted_loads(dumps(torch.arange(3.0))), torch.arange(3.0))  # starts this process's sharer
    test_a_window_of_calls_runs_each_on_its_set_and_says_where_the_outputs_are(False)


PEEKING_TASK = '''
import gc
import struct
import time

import torch
import torch.nn as nn

HARNESS = []


class Model(nn.Module):
    def forward(self, x):
        """Waits 20 ms, then returns the serial of the bell's go word: what the judge has rung meanwhile."""
        if not HARNESS:
            HARNESS.extend(o for o in gc.get_objects() if type(o).__name__ == "Harness")
        time.sleep(0.02)
        return torch.full_like(x, float(struct.unpack_from("<Q", HARNESS[0].bell, 0)[0] >> 32))


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


def test_through_the_bell_no_call_is_rung_before_the_last_one_returned():
    """A call is answered once it returned, and only then is the next rung: while a call runs, the
    bell holds that call, so no call learns it is its window's last (a short window's last call could
    then be padded, unseen, and the difference of long and short windows read fast). Answering as a
    call is taken saved 1-6 us a call (bench/results/2026-11-27-small-path): tried and dropped for
    this. Also the child's own account of a call's path, as the calibration shows it."""
    child = CandidateProcess(None, None)
    child.fast = True
    try:
        child.exchange(("prepare", {"device": "cpu", "env": {}, "seccomp": False, "wall": None, "bell": True}), 60,
                       "prepare", expect="prepared")
        spec = CandidateSpec(task_code=PEEKING_TASK, task_path="<task>", init_seed=0, model_new_path="")
        child.exchange(("baseline", {"spec": to_dict(spec), "name": "eager", "mode": "default"}), 60, "baseline",
                       expect="baseline")
        child.exchange(("buffers", {"count": 4, "descr": {"seq": "list", "items": [
            {"shape": [4, 8], "stride": [8, 1], "dtype": "float32", "device": "cpu"}]}}), 60, "buffers",
            expect="buffers")
        child.window(4, 30, "test window")
        first = child.serial - 4  # the first call's (rung through the pipe); the end's is child.serial
        seen = []
        for j in range(4):
            address, size = EXTENT.unpack_from(child.tail, COUNT.size + j * EXTENT.size)
            seen.append(int(torch.frombuffer(bytearray(child.read_memory(address, size)), dtype=torch.float32)[0]))
        assert seen[0] < first and seen[1:] == [first + 1, first + 2, first + 3]
        reply, _ = child.exchange(("drop", None), 60, "drop", expect="dropped")
        path = path_account({**reply[1], "note": "x" * 100, "between": float("nan")})
        assert set(path) == {"forward", "harness", "calls"} and path["calls"] == 4
        assert 20_000 <= path["forward"] < 1_000_000 and path["harness"] < path["forward"]
    finally:
        child.close()


PADDING_TASK = TASK.replace("class Model", '''import gc
import time

SEEN = [0]


def _pad_short_ends():
    for obj in gc.get_objects():
        if type(obj).__name__ == "Harness":
            original = obj.end

            def padded(word, _original=original, _harness=obj):
                calls = len(_harness.outputs)
                SEEN[0] = max(SEEN[0], calls)
                if 0 < calls < SEEN[0]:  # a short window: it shows at the end
                    time.sleep(0.05)
                _original(word)

            obj.end = padded
            return


class Model''').replace("    def forward(self, x):", '''    def __init__(self):
        super().__init__()
        _pad_short_ends()

    def forward(self, x):''')


@pytest.mark.parametrize("bell", [False, True], ids=["pipe", "bell"])
def test_a_short_window_ends_at_its_last_answer_so_its_end_cannot_be_padded(bell):
    """The child counts a window's calls when its end is rung, so with the end in its time it could
    delay short windows only (long less short then reads fast). A short window's time ends at its last
    call's answer and its end is rung after, untimed; the long windows keep theirs."""
    child = _runner(bell, PADDING_TASK)
    try:
        child.exchange(("buffers", {"count": 4, "descr": {"seq": "list", "items": [
            {"shape": [4, 8], "stride": [8, 1], "dtype": "float32", "device": "cpu"}]}}), 60, "buffers",
            expect="buffers")
        assert child.window(4, 30, "long") < 0.05
        assert child.window(2, 30, "short, its end timed", end_timed=True) >= 0.05  # the attack works there
        assert child.end_s >= 0.05
        short = child.window(2, 30, "short", end_timed=False)
        assert short < 0.05 and child.stopped
        assert COUNT.unpack_from(child.tail, 0)[0] == 2  # the end was rung all the same: its outputs are known
        assert child.window(4, 30, "long again") < 0.05
    finally:
        child.close()
