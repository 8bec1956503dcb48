"""Attack (the judge's memory, Python): opens the judge's /proc/<pid>/mem, environ, maps and every
descriptor under fd/ (where the seed, the reference outputs and its channels are)."""
import os

import torch.nn as nn

import cuda_extension

def _judge_pid():
    """The judge is this process's parent: /proc/self/stat says so even inside a PID namespace."""
    with open("/proc/self/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])


def _report(results):
    print(" | ".join(results), flush=True)
    if any(r.startswith("LEAKED") for r in results):
        raise RuntimeError("read the judge: " + "; ".join(results))


def _attack():
    pid, results = _judge_pid(), []
    for what in ("mem", "environ", "maps", "fd"):
        path = f"/proc/{pid}/{what}"
        try:
            if what == "fd":
                for name in os.listdir(path):
                    os.close(os.open(f"{path}/{name}", os.O_RDONLY))
            else:
                open(path, "rb").close()
            results.append(f"LEAKED {what} of {pid}")
        except OSError as exc:
            results.append(f"denied {what}: {exc.strerror}")
    _report(results)


_attack()


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.relu_forward(x)
