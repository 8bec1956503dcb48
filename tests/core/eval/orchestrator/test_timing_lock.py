"""The machine-wide timing slot (kag.core.eval.orchestrator.timing_lock), across real processes, and the load
meter that says under which conditions a timing was taken."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kag.core.eval.orchestrator.timing_lock import LoadMeter, TimingConditions, TimingSlot, differ

HOLD = """
import json, sys, time
from kag.core.eval.orchestrator.timing_lock import TimingSlot
mode, name, hold, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
slot = TimingSlot("cpu", sys.argv[5])
asked = time.time()
with (slot.exclusive(timeout_s=30) if mode == "x" else slot.shared(timeout_s=30)) as got:
    start = time.time()
    time.sleep(hold)
    end = time.time()
locked = got.locked if mode == "x" else got
with open(out, "a") as f:
    f.write(json.dumps({"name": name, "asked": asked, "start": start, "end": end, "locked": locked}) + "\\n")
"""


def spawn(tmp_path: Path, mode: str, name: str, hold: float) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[4])}
    return subprocess.Popen([sys.executable, "-c", HOLD, mode, name, str(hold), str(tmp_path / "log.jsonl"),
                             str(tmp_path / "locks")], env=env)


def wait_queued(slot: TimingSlot, n: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while slot.waiting() < n:
        assert time.monotonic() < deadline, f"{n} waiters never queued"
        time.sleep(0.02)


def read_log(tmp_path: Path) -> dict[str, dict]:
    return {r["name"]: r for r in map(json.loads, (tmp_path / "log.jsonl").read_text().splitlines())}


def test_timings_of_several_processes_never_overlap_and_are_served_in_order(tmp_path):
    slot = TimingSlot("cpu", tmp_path / "locks")
    with slot.exclusive() as held:  # this process times; three others ask, one after the other
        assert held.locked and held.queued_ahead == 0
        procs = []
        for i, name in enumerate("abc"):
            procs.append(spawn(tmp_path, "x", name, 0.3))
            wait_queued(slot, i + 1)
        released = time.time()
    assert all(p.wait(60) == 0 for p in procs)
    log = read_log(tmp_path)
    order = sorted(log.values(), key=lambda r: r["start"])
    assert [r["name"] for r in order] == ["a", "b", "c"]  # FIFO
    assert all(r["locked"] for r in order)
    assert order[0]["start"] >= released
    for before, after in zip(order, order[1:]):
        assert after["start"] >= before["end"]


def test_heavy_work_waits_for_a_timing_and_a_timing_for_heavy_work(tmp_path):
    slot = TimingSlot("cpu", tmp_path / "locks")
    with slot.exclusive() as held:
        assert held.locked
        heavy = spawn(tmp_path, "s", "build", 0.5)
        time.sleep(1.0)  # the build asked while we time: it must not have started
        released = time.time()
    assert heavy.wait(60) == 0
    assert read_log(tmp_path)["build"]["start"] >= released
    (tmp_path / "log.jsonl").unlink()
    with slot.shared() as got:  # this process builds; a timing asks, then another build
        assert got
        timing = spawn(tmp_path, "x", "timing", 0.5)
        wait_queued(slot, 1)
        build = spawn(tmp_path, "s", "build2", 0.1)
        time.sleep(1.0)
        released = time.time()
    assert timing.wait(60) == 0 and build.wait(60) == 0
    log = read_log(tmp_path)
    assert log["timing"]["start"] >= released  # the timing waited for the build in flight...
    assert log["build2"]["start"] >= log["timing"]["end"]  # ...and the next build for the timing


def test_the_wait_is_bounded_and_says_it_timed_unlocked(tmp_path):
    slot = TimingSlot("cpu", tmp_path / "locks")
    holder = spawn(tmp_path, "x", "holder", 5.0)
    deadline = time.monotonic() + 30
    while not (tmp_path / "locks" / "timing-cpu.lock").exists() or slot.waiting():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    with slot.exclusive(timeout_s=0.5) as cond:
        assert not cond.locked and cond.wait_s >= 0.5
        assert "without the cpu timing slot" in (cond.loaded() or "")
    with slot.shared(timeout_s=0.3) as got:
        assert not got
    assert holder.wait(60) == 0
    assert slot.waiting() == 0  # the timed-out waiter took its ticket back


def test_a_killed_waiter_does_not_block_the_queue(tmp_path):
    slot = TimingSlot("cpu", tmp_path / "locks")
    with slot.exclusive():
        dead = spawn(tmp_path, "x", "dead", 0.1)
        wait_queued(slot, 1)
        dead.kill()
        dead.wait()
        alive = spawn(tmp_path, "x", "alive", 0.1)
        time.sleep(0.5)
    assert alive.wait(60) == 0
    assert set(read_log(tmp_path)) == {"alive"}


def test_the_meter_counts_other_processes_work_and_not_the_evaluations_own(tmp_path):
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        others, own = LoadMeter(), LoadMeter((spinner.pid,))
        with others.measuring(), own.measuring():
            time.sleep(1.5)
    finally:
        spinner.kill()
        spinner.wait()
    # the spinner's CPU time is "other work" to one meter and the evaluation's own to the other
    assert others.others_s - own.others_s > 0.1
    cond = TimingConditions(slot="cpu", locked=True, cpus=os.cpu_count() or 1)
    others.fill(cond)
    assert cond.others_cpus is not None and cond.others_cpus > 0.05 and cond.loadavg_1m is not None


@pytest.mark.parametrize("a,b,apart", [((0.0, True), (0.1, True), False), ((0.0, True), (1.5, True), True),
                                       ((0.0, True), (0.0, False), True)])
def test_conditions_differ_when_the_loads_are_far_apart(a, b, apart):
    ca = TimingConditions(slot="cpu", locked=a[1], cpus=2, others_cpus=a[0])
    cb = TimingConditions(slot="cpu", locked=b[1], cpus=2, others_cpus=b[0])
    assert differ(ca, cb) is apart
    assert (cb.loaded() is not None) is (b[0] > 0.5 or not b[1])


def test_the_candidate_cannot_open_the_timing_slots(tmp_path):
    """A confined candidate could hold a slot (an flock needs only a descriptor) and stall every
    other evaluation's timing: Landlock keeps it out of the lock folder, even for reading."""
    from tests.core.trust.test_isolation import NEEDS_LANDLOCK, in_confined_child, tries
    from kag.core.trust.isolation import candidate_plan

    if NEEDS_LANDLOCK.args[0]:
        pytest.skip(NEEDS_LANDLOCK.kwargs["reason"])
    import fcntl
    import shutil

    slot = TimingSlot("cpu")  # the real folder ($KAG_LOCK_DIR or <tmp>/kag-locks)
    with slot.exclusive(timeout_s=60):
        pass  # makes the files
    plan = candidate_plan(cuda=False)

    def attack(_: int) -> dict:
        def hold(path: Path) -> None:
            fd = os.open(path, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)

        return {"lock": tries(lambda: hold(slot.lock_path)), "queue": tries(lambda: hold(slot.queue_path)),
                "list": tries(lambda: os.listdir(slot.dir))}

    try:
        found = in_confined_child(plan, attack, seccomp=False)
    finally:
        shutil.rmtree(plan.tmp_dir, ignore_errors=True)
    assert all(v.startswith("denied") for v in found.values()), found


def test_builds_leave_one_core_per_gpu_to_the_timings():
    from kag.core.eval.orchestrator.timing_lock import build_cores

    assert build_cores(list(range(16)), 2) == set(range(14))
    assert build_cores(list(range(32)), 2) == set(range(30))
    assert build_cores([0, 1], 0) is None  # no GPU: the CPU's timing slot keeps builds away instead
    assert build_cores([0, 1, 2], 2) is None  # builds would be left a single core: no restriction


def test_build_cores_can_be_chosen_or_left_unrestricted(monkeypatch, capsys):
    from kag.core.eval.orchestrator import timing_lock

    cores = list(range(16))  # a 16-core host with one GPU: the default keeps core 15 off builds
    monkeypatch.setattr(timing_lock.os, "sched_getaffinity", lambda pid: set(cores))
    assert timing_lock.parse_cores("0-2, 5") == {0, 1, 2, 5}

    def affinity(value: str):
        monkeypatch.setenv("KAG_BUILD_CORES", value)
        timing_lock.build_affinity.cache_clear()
        try:
            return timing_lock.build_affinity()
        finally:
            timing_lock.build_affinity.cache_clear()

    monkeypatch.setattr(timing_lock, "host_gpu_count", lambda: 1)
    assert affinity("all") is None
    assert affinity(f"{cores[0]},99999") == frozenset(cores[:1])  # cores this process lacks are dropped
    default = frozenset(range(15))
    assert affinity("") == default
    assert affinity("4-7") == frozenset(range(4, 8))
    assert affinity("7-3") == default and "KAG_BUILD_CORES='7-3'" in capsys.readouterr().err
    assert affinity("99999") == default  # none of ours: the default, and a one-line warning
    assert "none of this process's cores" in capsys.readouterr().err
    assert affinity("0-4000000000") == frozenset(cores)  # a range past the last core stops there
    assert affinity("0-") == default and "KAG_BUILD_CORES='0-'" in capsys.readouterr().err


def test_a_compiler_and_the_processes_it_starts_run_on_the_build_cores_at_idle_priority(tmp_path, monkeypatch):
    import os
    import sys

    from kag.core.eval.orchestrator import compile_run, timing_lock

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        import pytest

        pytest.skip("needs 2 cores")
    monkeypatch.setattr(timing_lock, "build_affinity", lambda: frozenset(cores[:1]))
    monkeypatch.setattr(timing_lock, "host_slot", lambda: None)  # a GPU host: builds run beside timings
    probe = "import os, time; time.sleep(0.3); print(sorted(os.sched_getaffinity(0)), os.sched_getscheduler(0))"
    got = compile_run.run(["sh", "-c", f"sleep 0.3; {sys.executable} -c '{probe}'"], tmp_path, time.monotonic() + 60)
    code, out = got.rc, got.out
    assert code == 0, out
    # the grandchild, forked after the compiler started, inherits its cores and its idle-only policy
    assert out.strip() == f"{cores[:1]} {os.SCHED_IDLE}"
    monkeypatch.setattr(timing_lock, "host_slot", lambda: "cpu")  # a CPU host: builds wait for timings instead
    got = compile_run.run(["sh", "-c", f"{sys.executable} -c '{probe}'"], tmp_path, time.monotonic() + 60)
    assert got.rc == 0 and got.out.strip().endswith(f" {os.SCHED_OTHER}"), got.out


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="a GPU host's builds do not take the CPU's slot")
def test_every_build_waits_for_a_timing_on_this_cpu_kag_build_included(tmp_path):
    """Not only an evaluation's build: `kag build` (and an agent's compile tool, which calls the same
    build) must not run its compilers beside a timing (8 of them flipped a CPU verdict to reward 3)."""
    repo = Path(__file__).resolve().parents[4]
    env = {**os.environ, "PYTHONPATH": str(repo), "KAG_LOCK_DIR": str(tmp_path / "locks"),
           "KAG_CACHE_DIR": str(tmp_path / "cache")}

    def cmd(example: str) -> list[str]:
        return [sys.executable, "-m", "kag.cli.main", "build", str(repo / "examples" / example / "cpu"), "--backend",
                "cpu", "--out", str(tmp_path / "out" / example), "--json"]

    slot = TimingSlot("cpu", tmp_path / "locks")

    def build_beside_a_timing(example: str) -> list[tuple[str, float]]:
        """`kag build` asked for while this process times; the cache files it wrote before the end."""
        before = {f for f in (tmp_path / "cache").rglob("*")}
        with slot.exclusive() as held:
            assert held.locked
            build = subprocess.Popen(cmd(example), env=env, stdout=subprocess.PIPE, text=True)
            time.sleep(4.0)  # it asks within ~1 s (Python's start)
            released = time.time()
        out, _ = build.communicate(timeout=300)
        result = json.loads(out)
        assert result["ok"] and result["slot_quiet"] and result["compiled"], result
        written = [f for f in (tmp_path / "cache").rglob("*") if f not in before and f.suffix in (".json", ".o", ".so")]
        assert written
        return [(f.name, round(released - f.stat().st_mtime, 3)) for f in written if f.stat().st_mtime < released - 0.05]

    assert build_beside_a_timing("sigmoid") == []  # a cold cache: importing torch for its facts waited
    assert build_beside_a_timing("relu") == []  # torch's facts cached: the compilers waited
    with slot.exclusive():  # a build that compiles nothing (all cached) does not wait
        again = subprocess.run(cmd("relu"), env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(again.stdout)["cached"] and json.loads(again.stdout)["slot_wait_s"] == 0.0


def test_a_timeout_is_the_solutions_only_when_its_compiler_had_the_cpu(tmp_path):
    """At the build's deadline the compiler's process group's CPU time decides: a compile bomb runs
    flat out (the solution's fault); a compiler that waited for the CPU (sixteen on two cores) was
    starved (the evaluator's)."""
    import sys

    from kag.core.eval.orchestrator.compile_run import run

    busy = run([sys.executable, "-c", "while True: pass"], tmp_path, time.monotonic() + 1.5, idle=False)
    assert busy.timed_out and not busy.starved and busy.cpu_s > 1.0, busy
    waiting = run(["sh", "-c", "sleep 30"], tmp_path, time.monotonic() + 1.5, idle=False)
    assert waiting.timed_out and waiting.starved and waiting.cpu_s < 0.5, waiting
    quick = run(["sh", "-c", "echo done"], tmp_path, time.monotonic() + 10, idle=False)
    assert quick.ok and quick.out.strip() == "done"


def test_the_suite_never_waits_for_another_users_timing(tmp_path):
    """Another user's `kag score` holds the machine-wide CPU slot (<tmp>/kag-locks): the suite's
    evaluations use a lock folder of their own (tests/conftest.py) and do not wait for it."""
    import tempfile

    from kag.core.eval.orchestrator.timing_lock import lock_dir

    default = Path(tempfile.gettempdir()) / "kag-locks"
    assert lock_dir() != default and os.environ["KAG_LOCK_DIR"]
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from kag.core.eval.orchestrator.timing_lock import TimingSlot\n"
        f"with TimingSlot('cpu', {str(default)!r}).exclusive(timeout_s=60) as s:\n"
        "    print('held', flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if k != "KAG_LOCK_DIR"})
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with TimingSlot("cpu").exclusive(timeout_s=30) as held:  # the suite's own folder
            assert held.locked
        assert time.monotonic() - t0 < 5
    finally:
        holder.kill()
        holder.wait()
