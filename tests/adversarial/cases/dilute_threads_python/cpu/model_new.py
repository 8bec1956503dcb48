"""Attack: threads started from Python (threading) spin in the solution's own module, the GIL released,
while the binding runs ATen's at::cpu::clamp_min (no RecordFunction fires): most of the candidate's
computing samples are then the solution's"""
import threading

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.spinners = [threading.Thread(target=cuda_extension.spin, daemon=True) for _ in range(4)]
        for t in self.spinners:
            t.start()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu_forward(x)
