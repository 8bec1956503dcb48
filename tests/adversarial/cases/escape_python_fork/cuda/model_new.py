"""Attack (escaping processes, Python): a double fork with setsid at import; the grandchild renames
itself and lingers, to outlive the evaluation and tamper with the next one."""
import ctypes
import os
import time

import torch.nn as nn

import cuda_extension

def _name_me():
    ctypes.CDLL(None).prctl(15, b"kag-escapee", 0, 0, 0)  # PR_SET_NAME: how the test finds survivors


def _escape():
    try:
        pid = os.fork()
    except OSError as exc:
        print(f"denied fork: {exc.strerror}", flush=True)
        return
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                _name_me()
                time.sleep(120)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    print("forked", flush=True)


_escape()


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.relu_forward(x)
