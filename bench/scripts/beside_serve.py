"""The main job's and the test command's times, idle and beside a busy `kag serve`.

    python3 bench/scripts/beside_serve.py --mode idle   [--skip-tests] [--out bench/out/beside_serve.md]
    python3 bench/scripts/beside_serve.py --mode beside [--skip-tests] [--out ...]

``idle``: the README's main job (`bash examples/run_example.sh relu`, a cold cache of its own), then
its test command (`python3 -m pytest -q -m "not slow"`), each timed. ``beside``: the same while a
`kag serve` answers two clients that submit honest CPU solutions (ReLU, Sigmoid) one after another
for the whole run: their rewards are checked against the rewards alone, and the table says how
many evaluations the server gave meanwhile. Appends a row per measurement to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import Server, env_for, kag  # noqa: E402


def timed(cmd: list[str], env: dict[str, str], log: Path) -> tuple[int, float, str]:
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        rc = subprocess.run(cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    tail = log.read_text().strip().splitlines()[-1:] or [""]
    return rc, time.perf_counter() - t0, tail[0]


class Clients:
    """Two clients, each scoring its example through the server again and again until stopped."""

    def __init__(self, socket: str, env: dict[str, str]) -> None:
        self.socket, self.env, self.stop = socket, env, threading.Event()
        self.results: list[tuple[str, float | None, float]] = []
        self.threads = [threading.Thread(target=self.loop, args=(name,), daemon=True) for name in ("relu", "sigmoid")]

    def loop(self, name: str) -> None:
        ex = REPO / "examples" / name / "cpu"
        while not self.stop.is_set():
            t0 = time.perf_counter()
            proc = subprocess.run(kag("score", "--backend", "cpu", "--task", str(ex / "model.py"), "--solution", str(ex),
                                      "--json", "--server", self.socket), env=self.env, capture_output=True, text=True)
            try:
                reward = (json.loads(proc.stdout).get("reward") or {}).get("value")
            except ValueError:
                reward = None
            self.results.append((name, reward, time.perf_counter() - t0))

    def __enter__(self) -> "Clients":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["idle", "beside"], required=True)
    ap.add_argument("--skip-tests", action="store_true")
    ap.add_argument("--logs", default=tempfile.gettempdir(), help="where the jobs' logs are kept")
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "beside_serve.md"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kag-beside-"))
    env = dict(os.environ, KAG_CACHE_DIR=str(work / "job-cache"))
    jobs = [("main job", ["bash", "examples/run_example.sh", "relu", str(work / "runs" / "relu")])]
    if not args.skip_tests:
        jobs.append(("test command", [sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider"]))
    rows = []
    server = clients = None
    if args.mode == "beside":
        # the machine's default lock folder: the server's timings and the main job's take turns, as for a user
        senv = {k: v for k, v in env_for(work, "serve-cache").items() if k != "KAG_LOCK_DIR"}
        server = Server(work, senv)
        server.start()
        clients = Clients(server.socket, senv).__enter__()
    try:
        for name, cmd in jobs:
            load0 = os.getloadavg()[0]
            rc, seconds, tail = timed(cmd, env, work / f"{name.replace(' ', '_')}.log")
            rows.append((name, rc, seconds, tail, load0, os.getloadavg()[0]))
            print(f"{name}: exit {rc} in {seconds:.0f} s ({tail})", flush=True)
    finally:
        if clients is not None:
            clients.__exit__(None, None, None)
        if server is not None:
            server.kill()
    lines = []
    stamp = time.strftime("%Y-%m-%d %H:%M")
    for name, rc, seconds, tail, load0, load1 in rows:
        lines.append(f"| {stamp} | {args.mode} | {name} | {rc} | {seconds:.0f} | {load0:.1f} -> {load1:.1f} | {tail} |")
    if clients is not None:
        by = {}
        for name, reward, sec in clients.results:
            by.setdefault(name, []).append((reward, sec))
        text = "; ".join(f"{n}: {len(v)} evaluations, rewards {sorted({r for r, _ in v}, key=str)}, "
                         f"median {sorted(s for _, s in v)[len(v) // 2]:.0f} s" for n, v in by.items())
        lines.append(f"| {stamp} | beside | kag serve's two clients meanwhile | | | | {text} |")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists():
        out.write_text(f"machine: {os.cpu_count()} CPUs\n\n| when | mode | what | exit | seconds | load average "
                       f"(start -> end) | last line / clients |\n|---|---|---|---|---|---|---|\n")
    with open(out, "a") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    logs = Path(args.logs)
    logs.mkdir(parents=True, exist_ok=True)
    for log in work.glob("*.log"):  # the failures are in them
        shutil.copy(log, logs / f"{args.mode}_{log.name}")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r[1] == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
