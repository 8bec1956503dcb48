"""Print the KAG_TRACE marks of the last evaluation in the given logs, in time order.

    python bench/scripts/trace_timeline.py SERVE_LOG CLIENT_STDERR RESULT_JSON

The server's log holds every request's marks (orchestrator and judge); the result's
``metadata.candidate_output`` holds the candidate's. The timeline starts at the orchestrator's
last "judge started" / "a warm judge is waiting" mark, so only the last request is shown.
"""

from __future__ import annotations

import json
import sys


def main(serve_log: str, client_err: str, result_json: str) -> None:
    lines: list[str] = []
    for path in (serve_log, client_err):
        with open(path, encoding="utf-8", errors="replace") as f:
            lines += f.read().splitlines()
    with open(result_json, encoding="utf-8") as f:
        result = json.load(f)
    lines += (result.get("metadata", {}).get("candidate_output") or "").splitlines()
    marks = sorted((float(l.split()[1]), l.split(" ", 2)[2]) for l in lines if l.startswith("[kag-trace]"))
    starts = [t for t, rest in marks if rest.startswith("orchestrator") and ("judge started" in rest or "warm judge" in rest)]
    t0 = starts[-1] if starts else (marks[0][0] if marks else 0.0)
    print("timeline of the last traced request (s after the orchestrator's first mark):")
    for t, rest in marks:
        if t >= t0 - 0.001:
            print(f"  {t - t0:7.3f}  {rest}")
    print("durations_s:", result.get("durations_s"))
    print("calibration:", result.get("metadata", {}).get("calibration"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
