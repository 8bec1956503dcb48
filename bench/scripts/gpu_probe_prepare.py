"""Why a CUDA candidate's start could fail after its confinement: CUDA initialised in a forked child
confined as a candidate is (kag.core.trust.isolation.CandidatePlan.apply_in_child), as shipped and
with one change at a time (/proc/self writable again, or some of its entries; no archive file
excluded). Prints one JSON
line per variant, and where the excluded archives lie.

    python bench/scripts/gpu_probe_prepare.py
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def child(variant: str, wfd: int) -> None:
    import attrs

    from kag.core.trust import confine, isolation
    from kag.core.trust.fatbin_wall import archive_files

    plan = isolation.candidate_plan(True)
    if variant == "no_archives":
        gone = set(archive_files())
        plan.unreadable = tuple(p for p in plan.unreadable if p not in gone)
    extra: tuple[str, ...] = ()
    if variant == "self_writable":
        extra = ("/proc/self",)
    elif variant == "all_but_mem_task":
        extra = tuple(f"/proc/self/{e}" for e in os.listdir("/proc/self") if e not in ("mem", "task"))
    elif variant.startswith("only:"):
        extra = tuple(f"/proc/self/{e}" for e in variant[5:].split("+"))
    if extra:
        real = confine.apply_landlock

        def widened(policy):
            return real(attrs.evolve(policy, write=policy.write + extra))
        confine.apply_landlock = widened
    out = {"variant": variant}
    try:
        plan.apply_in_child()
        out["applied"] = plan.applied
        import torch

        out["devices"] = torch.cuda.device_count()
        out["sum"] = float(torch.ones(4, device="cuda").sum())
        out["ok"] = True
    except BaseException as e:  # noqa: BLE001 - the probe reports whatever stopped it
        out.update(ok=False, error=f"{type(e).__name__}: {e}"[:400])
    os.write(wfd, json.dumps(out).encode())
    os._exit(0)


def main() -> None:
    import torch  # noqa: F401  imported before the fork, as the judge has it when it forks a candidate

    from kag.core.trust.fatbin_wall import archive_files

    arch = archive_files()
    print(json.dumps({"archives": len(arch), "folders": Counter(os.path.dirname(a) for a in arch).most_common(12)}))
    singles = ["only:" + e for e in ("task", "fd", "comm", "oom_score_adj", "coredump_filter", "attr", "timerslack_ns",
                                      "clear_refs", "sched", "autogroup", "loginuid", "setgroups", "uid_map", "gid_map",
                                      "projid_map", "sessionid", "make-it-fail", "fail-nth", "ns", "map_files")]
    for variant in ("shipped", "self_writable", "all_but_mem_task", *singles):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            child(variant, w)
        os.close(w)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        _, status = os.waitpid(pid, 0)
        print(data.decode() or json.dumps({"variant": variant, "ok": False, "status": status}), flush=True)


if __name__ == "__main__":
    main()
