"""The window protocol between the judge and a child (kag.core.eval.candidate_process and the
harness in kag.core.eval.candidate), driven directly on the CPU: windows of several calls rung
through the pipe and through the shared bell, each call on its own staged input set, the outputs
found in the stopped child's memory where the window's end says they are."""

from __future__ import annotations

import pytest
import torch

from kag.core.eval.candidate import EXTENT, COUNT
from kag.core.eval.candidate_process import CandidateProcess
from kag.core.eval.spec import CandidateSpec
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


def _runner(bell: bool) -> CandidateProcess:
    child = CandidateProcess(None, None)
    child.fast = bell
    child.exchange(("prepare", {"device": "cpu", "env": {}, "seccomp": False, "wall": None, "bell": bell}), 60,
                   "prepare", expect="prepared")
    spec = CandidateSpec(task_code=TASK, task_path="<task>", init_seed=0, model_new_path="")
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
    from kag.core.eval.channel import dumps, restricted_loads

    assert torch.equal(restricted_loads(dumps(torch.arange(3.0))), torch.arange(3.0))  # starts this process's sharer
    test_a_window_of_calls_runs_each_on_its_set_and_says_where_the_outputs_are(False)
