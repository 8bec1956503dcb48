"""What the timed child's raise buys against another session's work: two spinners pinned to one CPU, X
in a session of its own (as a judge's children are), Y in another, X raised at nice -5 by per-thread
nice alone, then by kag's timed_priority (its threads and, where the kernel groups tasks by session,
its session's group). Prints the CPU seconds each got in 2 s. Run as root on Linux:

    python3 bench/scripts/priority_share.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from kag.core.eval.judge import priority

SPIN = "import os, time\nos.sched_setaffinity(0, {1})\nt = time.time()\nwhile time.time() - t < 2.0: pass\nprint(time.process_time())"


class Handle:
    """What timed_priority needs of a child: its pid and whether it is stopped (it is not)."""

    def __init__(self, popen: subprocess.Popen) -> None:
        self.pid = popen.pid
        self.stopped = self.stop_sent = False


def main() -> None:
    print("tasks grouped by session:", priority.autogroup_nice(os.getpid()) is not None)
    for mode in ("per-thread nice only", "timed_priority"):
        x, y = (subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True, start_new_session=True)
                for _ in range(2))
        time.sleep(0.05)
        if mode == "per-thread nice only":
            os.setpriority(os.PRIO_PROCESS, x.pid, priority.timed_nice())
            x_out = x.communicate()[0]
        else:
            with priority.timed_priority(Handle(x)):
                x_out = x.communicate()[0]
        print(f"{mode}: CPU s of X (raised) {float(x_out):.2f}, Y {float(y.communicate()[0]):.2f}")


if __name__ == "__main__":
    main()
