"""On a GPU: the corpus's attacks on the timing's base, timed with every static guard off (the device;
skipped without a GPU). The whole CUDA corpus runs through bench/scripts/adversarial.py."""

from __future__ import annotations

import pytest
import torch

from tests.adversarial.cases import cases
from tests.adversarial.conftest import guard_plugins
from tests.adversarial.runner import describe, run_case

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("name", ["pad_short_windows_python", "pad_short_windows_kernel"])
def test_a_padded_short_window_end_buys_no_speed(name: str) -> None:
    """A call's time is long windows less short ones, and the child learns a window's size at its end:
    one that pads short windows' ends (CPU spin, or a GPU kernel of its own), doing twice an honest
    ReLU's work, would read fast. A short window's time ends at its last call's answer; it gets only the
    speed it has."""
    case = next(c for c in cases("cuda") if c.name == name)
    result = run_case(case, guard_plugins(), do_timing=True, static_guards=False)
    assert result.ok and not result.violations, describe(result, case)
    assert (result.speedup_vs_eager or 0.0) < 1.0 and result.reward.value <= 1, describe(result, case)
