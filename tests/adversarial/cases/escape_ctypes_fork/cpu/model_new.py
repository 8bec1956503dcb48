"""Attack (escaping processes, ctypes): libc's fork and a raw clone syscall, then setsid, from
inside forward; the child renames itself and lingers."""
import ctypes
import os
import time

import torch.nn as nn

import cuda_extension

def _name_me():
    ctypes.CDLL(None).prctl(15, b"kag-escapee", 0, 0, 0)  # PR_SET_NAME: how the test finds survivors


def _escape():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    for what, call in (("fork", libc.fork), ("clone", lambda: libc.syscall(56, 17, 0, 0, 0, 0))):
        pid = call()
        if pid < 0:
            print(f"denied {what}: {os.strerror(ctypes.get_errno())}", flush=True)
        elif pid == 0:
            libc.setsid()
            _name_me()
            time.sleep(120)
            os._exit(0)
        else:
            print(f"{what} worked", flush=True)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.done = False

    def forward(self, x):
        if not self.done:
            self.done = True
            _escape()
        return cuda_extension.relu_forward(x)
