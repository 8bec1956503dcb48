"""The security lane (tests/conftest.py): with KAG_SECURITY_LANE=1 a sandbox test that skips for a missing
layer fails; other skips (no GPU, an optional package) stay skips, and so do docker tests unless the daemon was started for
the run (KAG_EXPECT_DOCKER=1); without the lane nothing changes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CASES = '''
import pytest


def test_landlock():
    pytest.skip("needs Landlock")


@pytest.mark.skipif(True, reason="namespaces and capabilities need root")
def test_root():
    pass


def test_gpu():
    pytest.skip("needs a CUDA GPU")


@pytest.mark.docker
def test_docker():
    pytest.skip("docker sandbox unavailable: no daemon")
'''


def _run(tmp_path: Path, lane: bool, docker_expected: bool = False) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_runtest_makereport  # noqa: F401\n")
    (tmp_path / "test_cases.py").write_text(CASES)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    docker: needs a running Docker daemon\n")
    env = {k: v for k, v in os.environ.items() if k not in ("KAG_SECURITY_LANE", "KAG_EXPECT_DOCKER")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    if lane:
        env["KAG_SECURITY_LANE"] = "1"
    if docker_expected:
        env["KAG_EXPECT_DOCKER"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def test_sandbox_skips_fail_in_the_lane_and_other_skips_do_not(tmp_path):
    lane = _run(tmp_path, lane=True)
    assert lane.returncode == 1, lane.stdout
    # a skip in the call fails it; a skipif (in setup) is an error: neither passes nor skips
    assert "1 failed, 2 skipped, 1 error" in lane.stdout, lane.stdout
    assert "security lane" in lane.stdout
    plain = _run(tmp_path, lane=False)
    assert plain.returncode == 0 and "4 skipped" in plain.stdout, plain.stdout


def test_docker_skips_fail_in_the_lane_only_where_the_daemon_was_started(tmp_path):
    expected = _run(tmp_path, lane=True, docker_expected=True)
    assert "2 failed, 1 skipped, 1 error" in expected.stdout, expected.stdout
    assert "docker sandbox unavailable" in expected.stdout
    outside = _run(tmp_path, lane=False, docker_expected=True)
    assert outside.returncode == 0 and "4 skipped" in outside.stdout, outside.stdout
