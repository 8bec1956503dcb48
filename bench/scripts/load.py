"""Load test (fair timing under load): N evaluations at once get the rewards each solution gets alone.

    python bench/scripts/load.py --backend cpu --n 4 [--paths serve,eval] [--faults] [--out FILE.md]
    python bench/scripts/load.py --backend cuda --n 8 --faults --out bench/out/load_h100.md

Honest solutions of clearly different speeds (``fast``: an example that beats eager and compile by
far; ``slow``: the ReLU example calling its kernel ``--slow-repeat`` times per forward) are first
scored alone, one after the other (``kag score``); then N at once through ``kag serve`` (N ``kag
score --server`` clients) and through ``kag eval --concurrency N`` (replayed episodes that write the
solution). Every phase starts from an empty cache, so the baselines are timed under the load of
that phase (a baseline timed under load must not be cached for good). A phase passes when every
evaluation answered (nothing lost, none hung past ``--timeout``) with the reward it got alone. ``--faults`` then kills
the server with clients in flight, kills the judges of an evaluation, and fills the disk of the
cache folder (a tmpfs: needs root): clients must get a one-line error or a result that says the
evaluator failed, never a wrong reward, and a restarted server must serve again.

Prints a markdown table (throughput, p50/p99 latency per evaluation, rewards alone and under load)
and writes it to ``--out``. Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EX = REPO / "examples"


def task_file(example: str, backend: str) -> Path:
    if backend == "cpu":
        return EX / example / "cpu" / "model.py"
    return EX / "kernelbench_sample" / (EX / example / "task.txt").read_text().strip()


def make_solutions(work: Path, backend: str, slow_repeat: int) -> dict[str, tuple[Path, Path]]:
    """name -> (task file, solution folder)."""
    fast = ("fast", "gemm_divide_sum_scaling")
    sols = {fast[0]: (task_file(fast[1], backend), EX / fast[1] / backend)}
    slow_dir = work / "solutions" / "slow"
    shutil.copytree(EX / "relu" / backend, slow_dir, ignore=shutil.ignore_patterns("model.py", "replay.json"))
    model_new = (slow_dir / "model_new.py").read_text()
    call = "cuda_extension.relu_forward(x)"
    assert f"return {call}" in model_new, "examples/relu model_new.py changed: update bench/scripts/load.py"
    slowed = model_new.replace(f"return {call}", f"for _ in range({slow_repeat - 1}):  # honest, slow: the same work again\n"
                                                 f"            {call}\n        return {call}")
    (slow_dir / "model_new.py").write_text(slowed)
    sols["slow"] = (task_file("relu", backend), slow_dir)
    return sols


def env_for(work: Path, cache: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["KAG_CACHE_DIR"] = str(work / cache)
    env["KAG_LOCK_DIR"] = str(work / "locks")  # this run's machine-wide slots (not other users' runs)
    return env


def kag(*args: str) -> list[str]:
    return [sys.executable, "-m", "kag.cli.main", *args]


def score_args(args: argparse.Namespace, task: Path, sol: Path) -> list[str]:
    return ["score", "--backend", args.backend, "--task", str(task), "--solution", str(sol), "--json",
            "--num-timed", str(args.num_timed)]


def run_client(cmd: list[str], env: dict[str, str], timeout: float) -> dict:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"hung": True, "latency_s": time.perf_counter() - t0}
    out = {"rc": proc.returncode, "latency_s": time.perf_counter() - t0, "stderr": proc.stderr.strip()}
    try:
        out["result"] = json.loads(proc.stdout)
    except ValueError:
        out["result"] = None
    return out


def start_clients(cmds: list[list[str]], env: dict[str, str]) -> list[tuple[subprocess.Popen, float, Path]]:
    """Each client with its output in files (pipes left unread would stall it)."""
    clients = []
    for cmd in cmds:
        out = Path(tempfile.mkstemp(prefix="kag-load-client-")[1])
        with open(out, "w") as stdout, open(out.with_suffix(".err"), "w") as stderr:
            clients.append((subprocess.Popen(cmd, env=env, stdout=stdout, stderr=stderr, text=True),
                            time.perf_counter(), out))
    return clients


def collect(clients: list[tuple[subprocess.Popen, float, Path]], timeout: float) -> list[dict]:
    """Wait for every client (up to ``timeout``); each one's latency is taken when it exits."""
    ends: dict[int, float] = {}
    deadline = time.perf_counter() + timeout
    while len(ends) < len(clients) and time.perf_counter() < deadline:
        for i, (proc, _, _) in enumerate(clients):
            if i not in ends and proc.poll() is not None:
                ends[i] = time.perf_counter()
        time.sleep(0.2)
    outs = []
    for i, (proc, t0, path) in enumerate(clients):
        if i not in ends:
            proc.kill()
            proc.wait()
            outs.append({"hung": True, "latency_s": time.perf_counter() - t0})
            continue
        stdout, stderr = path.read_text(), path.with_suffix(".err").read_text()
        path.unlink()
        path.with_suffix(".err").unlink()
        try:
            result = json.loads(stdout)
        except ValueError:
            result = None
        outs.append({"rc": proc.returncode, "latency_s": ends[i] - t0, "stderr": stderr.strip(), "result": result})
    return outs


def reward_of(out: dict) -> float | None:
    res = out.get("result") or {}
    return (res.get("reward") or {}).get("value")


class Server:
    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.socket = str(work / "eval.sock")
        self.env = env
        self.proc: subprocess.Popen | None = None

    def start(self, *extra: str) -> None:
        self.proc = subprocess.Popen(kag("serve", "--socket", self.socket, *extra), env=self.env, stderr=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 180
        code = f"from kag.core.eval.serve.server import ping; ping({self.socket!r})"
        while subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True).returncode:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"kag serve did not start: {self.proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.5)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the server and its judges, as a crash would
            self.proc.wait()

    def judges(self) -> list[int]:
        """The judge processes under the server."""
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
                ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if "judge_entry" in cmd and self.proc and ppid == self.proc.pid:
                found.append(int(pid))
        return found


def latencies(outs: list[dict]) -> tuple[float, float]:
    lat = sorted(o["latency_s"] for o in outs)
    p99 = lat[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))]
    return statistics.median(lat), p99


def phase_row(path: str, n: int, names: list[str], outs: list[dict], alone: dict[str, float], wall: float) -> dict:
    got = [reward_of(o) for o in outs]
    lost = sum(1 for o in outs if not o.get("hung") and reward_of(o) is None)
    hung = sum(1 for o in outs if o.get("hung"))
    wrong = [f"{nm}: {g} (alone {alone[nm]})" for nm, g in zip(names, got) if g is not None and g != alone[nm]]
    p50, p99 = latencies(outs)
    return {"path": path, "n": n, "ok": not lost and not hung and not wrong, "lost": lost, "hung": hung,
            "wrong": wrong, "got": [f"{nm}={g}" for nm, g in zip(names, got)], "wall_s": round(wall, 1),
            "throughput_per_min": round(60 * n / wall, 2), "p50_s": round(p50, 1), "p99_s": round(p99, 1),
            "load": [((o.get("result") or {}).get("metadata") or {}).get("timing_load", {}).get("candidate", {})
                     .get("others_cpus") for o in outs]}


def serve_phase(args, work, sols, names, alone) -> dict:
    env = env_for(work, "cache-serve")
    server = Server(work, env)
    server.start()
    try:
        cmds = [kag(*score_args(args, *sols[nm]), "--server", server.socket) for nm in names]
        t0 = time.perf_counter()
        outs = collect(start_clients(cmds, env), args.timeout)
        return phase_row("kag serve + score --server", len(names), names, outs, alone, time.perf_counter() - t0)
    finally:
        server.kill()


def eval_phase(args, work, sols, names, alone) -> dict:
    data, replays, out = work / "eval-tasks", work / "eval-replays", work / "eval-out"
    data.mkdir()
    replays.mkdir()
    for i, nm in enumerate(names):
        task, sol = sols[nm]
        shutil.copy(task, data / f"{nm}_{i}.py")
        steps = [{"tool": "write", "args": {"path": str(f.relative_to(sol)), "content": f.read_text()}}
                 for f in sorted(sol.rglob("*")) if f.is_file() and f.name not in ("model.py", "replay.json")]
        read = [{"tool": "read", "args": {"path": "model_new.py"}}]  # the write tool overwrites only what was read
        (replays / f"{nm}_{i}.json").write_text(json.dumps(read + steps + [{"content": "done"}]))
    env = env_for(work, "cache-eval")
    cmd = kag("eval", "--dataset", f"local:{data}", "--concurrency", str(len(names)), "--policy", "replay",
              "--policy-option", f"path={replays}", "--backend", args.backend, "--out", str(out),
              "--num-timed", str(args.num_timed))
    t0 = time.perf_counter()
    res = run_client(cmd, env, args.timeout)
    wall = time.perf_counter() - t0
    rows = {}
    if (out / "results.jsonl").exists():
        for line in (out / "results.jsonl").read_text().splitlines():
            row = json.loads(line)
            rows[row["task"]] = row
    outs = []
    for i, nm in enumerate(names):
        row = rows.get(f"{nm}_{i}")
        result = (row or {}).get("result")
        lat = ((result or {}).get("durations_s") or {}).get("total", wall)
        outs.append({"result": result, "latency_s": lat, "hung": bool(res.get("hung")) and row is None})
    return phase_row("kag eval --concurrency", len(names), names, outs, alone, wall)


def fault_rows(args, work, sols, alone) -> list[dict]:
    rows = []
    env = env_for(work, "cache-faults")
    server = Server(work, env)
    name = "slow"
    cmd = kag(*score_args(args, *sols[name]), "--server", server.socket)

    def served_again(what: str) -> None:
        out = run_client(cmd, env, args.timeout)
        ok = reward_of(out) == alone[name]
        rows.append({"fault": f"{what}: then one request", "ok": ok,
                     "got": f"reward {reward_of(out)} (alone {alone[name]})" + ("" if ok else f"; {out.get('stderr', '')[-300:]}")})

    # 1. the server dies with clients in flight
    server.start()
    clients = start_clients([cmd] * 2, env)
    time.sleep(args.fault_after)
    server.kill()
    outs = collect(clients, args.timeout)
    clear = all(o.get("rc") not in (0, None) and o.get("result") is None and "Traceback" not in o.get("stderr", "")
                and o.get("stderr") for o in outs)
    rows.append({"fault": "kill -9 the server, 2 clients in flight", "ok": clear,
                 "got": " | ".join((o.get("stderr") or "hung").splitlines()[-1][:160] for o in outs)})
    server.start()
    served_again("server restarted")
    # 2. the judges die mid-evaluation
    clients = start_clients([cmd], env)
    time.sleep(args.fault_after)
    killed = server.judges()
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    out = collect(clients, args.timeout)[0]
    res = out.get("result") or {}
    flagged = res.get("error") and (res.get("metadata") or {}).get("judge_error")
    ok = bool(killed) and (flagged or reward_of(out) == alone[name])
    rows.append({"fault": f"kill -9 the server's judges ({len(killed)}) mid-evaluation", "ok": ok,
                 "got": (f"error ({res.get('error_kind')}, judge_error): {str(res.get('error'))[:120]}" if flagged
                         else f"reward {reward_of(out)}; {out.get('stderr', '')[-200:]}")})
    served_again("after the judges died")
    server.kill()
    # 3. the cache folder's disk is full
    mnt = work / "full-cache"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True).returncode:
        rows.append({"fault": "full disk under the cache folder", "ok": None, "got": "not run: mounting a tmpfs needs root"})
        return rows
    try:
        full_env = dict(env, KAG_CACHE_DIR=str(mnt))
        subprocess.run(["dd", "if=/dev/zero", f"of={mnt}/filler", "bs=64k"], capture_output=True)
        server = Server(work, full_env)
        server.start()
        out = run_client(cmd, full_env, args.timeout)
        res = out.get("result") or {}
        right = reward_of(out) == alone[name]
        # an error the evaluator owns (judge_error) or a one-line client error; a failed verdict
        # (reward -1 for an honest solution) is a result recorded wrong
        clear = (res.get("error") and (res.get("metadata") or {}).get("judge_error")) or (
            out.get("rc") and not res and "Traceback" not in out.get("stderr", "") and out.get("stderr"))
        rows.append({"fault": "full disk under the cache folder", "ok": bool(right or clear),
                     "got": f"reward {reward_of(out)}" + (f", error: {str(res.get('error'))[:160]}" if res.get("error")
                                                          else "") + f" {out.get('stderr', '')[-160:]}"})
        (mnt / "filler").unlink()
        out = run_client(cmd, full_env, args.timeout)
        rows.append({"fault": "disk freed: then one request", "ok": reward_of(out) == alone[name],
                     "got": f"reward {reward_of(out)} (alone {alone[name]})"})
        server.kill()
    finally:
        server.kill()
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    return rows


def table(args, alone, alone_detail, phases, faults, started: float) -> str:
    lines = [f"# bench/scripts/load.py: {args.n} evaluations at once, backend {args.backend}", "",
             f"Command: `python bench/scripts/load.py {' '.join(sys.argv[1:])}`  ",
             f"Machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end; "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {time.time() - started:.0f} s in all", "",
             "Alone (kag score, one at a time):", "",
             "| solution | reward | candidate ms | eager ms | compile ms |", "| --- | ---: | ---: | ---: | ---: |"]
    for nm, d in alone_detail.items():
        lines.append(f"| {nm} | {alone[nm]} | {d.get('candidate', 0):.4g} | {d.get('eager', 0):.4g} | "
                     f"{d.get('compile', 0):.4g} |")
    lines += ["", "| path | N | same rewards as alone | lost | hung | wall s | evals/min | p50 s | p99 s | rewards | "
              "others' CPUs while timing |", "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for p in phases:
        lines.append(f"| {p['path']} | {p['n']} | {'yes' if not p['wrong'] else 'NO: ' + '; '.join(p['wrong'])} | "
                     f"{p['lost']} | {p['hung']} | {p['wall_s']} | {p['throughput_per_min']} | {p['p50_s']} | "
                     f"{p['p99_s']} | {' '.join(p['got'])} | {p['load']} |")
    if faults:
        lines += ["", "| fault | survived | what the client got |", "| --- | --- | --- |"]
        for f in faults:
            ok = {True: "yes", False: "NO", None: "not run"}[f["ok"]]
            lines.append(f"| {f['fault']} | {ok} | {' '.join(str(f['got']).replace('|', '/').split())} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--n", type=int, default=4, help="evaluations at once")
    parser.add_argument("--paths", default="serve,eval", help="serve, eval or both")
    parser.add_argument("--faults", action="store_true", help="kill the server, the judges; fill the cache's disk")
    parser.add_argument("--num-timed", type=int, default=50)
    parser.add_argument("--slow-repeat", type=int, default=20, help="kernel calls per forward of the slow solution")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds before a request counts as hung")
    parser.add_argument("--fault-after", type=float, default=8.0, help="seconds into an evaluation a fault strikes")
    parser.add_argument("--budget-s", type=float, default=0.0, help="start no phase past this many seconds (0: none)")
    parser.add_argument("--work", help="work folder (default: a fresh temp folder)")
    parser.add_argument("--out", help="also write the table here")
    args = parser.parse_args()
    started = time.time()
    work = Path(args.work or tempfile.mkdtemp(prefix="kag-load-"))
    work.mkdir(parents=True, exist_ok=True)
    sols = make_solutions(work, args.backend, args.slow_repeat)
    names = [list(sols)[i % len(sols)] for i in range(args.n)]
    alone, detail = {}, {}
    env = env_for(work, "cache-alone")
    for nm, (task, sol) in sols.items():
        out = run_client(kag(*score_args(args, task, sol)), env, args.timeout)
        if reward_of(out) is None:
            print(f"load: {nm} alone gave no result: {out.get('stderr', '')[-2000:]}", file=sys.stderr)
            return 1
        alone[nm] = reward_of(out)
        detail[nm] = out["result"]["times_ms"]
        print(f"load: alone {nm}: reward {alone[nm]} {detail[nm]}", file=sys.stderr, flush=True)
    phases, skipped = [], []

    def in_budget(what: str) -> bool:  # a device call has a wall-clock limit: say what did not fit
        if args.budget_s and time.time() - started > args.budget_s:
            skipped.append(what)
            return False
        return True

    for path, phase in (("serve", serve_phase), ("eval", eval_phase)):
        if path in args.paths and in_budget(f"the {path} phase"):
            phases.append(phase(args, work, sols, names, alone))
            print(f"load: {phases[-1]}", file=sys.stderr, flush=True)
    faults = fault_rows(args, work, sols, alone) if args.faults and in_budget("the faults") else []
    faults += [{"fault": what, "ok": None, "got": f"not run: past --budget-s {args.budget_s:g}"} for what in skipped]
    text = table(args, alone, detail, phases, faults, started)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0 if all(p["ok"] for p in phases) and all(f["ok"] is not False for f in faults) else 1


if __name__ == "__main__":
    sys.exit(main())
