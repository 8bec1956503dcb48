"""The candidate fails closed: where its seccomp filter cannot be applied, it does not go on (without
the filter, mremap of a library's unsealed mapping reads GPU code back behind the fatbin wall)."""

from __future__ import annotations

import os

import pytest

from kag.core.eval.candidate.candidate import Harness
from kag.core.trust import confine


class _Ctrl:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)


def test_a_candidate_whose_seccomp_filter_fails_is_not_prepared(monkeypatch):
    def broken(**_: object) -> str:
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(confine, "apply_seccomp", broken)
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    ctrl = _Ctrl()
    try:
        harness = Harness(ctrl, go_r, done_w)
        with pytest.raises(RuntimeError, match="seccomp filter could not be applied"):
            harness.prepare({"device": "cpu", "seccomp": True})
        assert not ctrl.sent  # never answered "prepared"
        harness.prepare({"device": "cpu", "seccomp": False})  # off (KAG_CONFINE=0): prepared, as before
        assert len(ctrl.sent) == 1
    finally:
        for fd in (go_r, go_w, done_r, done_w):
            os.close(fd)
