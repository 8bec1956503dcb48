"""Attack (writing outside its folder, Python): at import, rewrites the baseline cache where it
expects it and plants a marker in /tmp, directly and through a symlink in its own folder."""
import os
import tempfile

import torch.nn as nn

import cuda_extension

_TARGETS = ["/root/.cache/kag/baselines.json", os.path.expanduser("~root/.cache/kag/baselines.json"),
            "/tmp/kag-adversarial-outside-marker"]


def _attack():
    results = []
    for target in _TARGETS:
        try:
            with open(target, "w") as fh:
                fh.write('{"forged": 0.001}')
            results.append(f"WROTE {target}")
        except OSError as exc:
            results.append(f"denied {target}: {exc.strerror}")
    link = os.path.join(tempfile.gettempdir(), "to-marker")
    try:
        os.symlink("/tmp/kag-adversarial-outside-marker", link)
        with open(link, "w") as fh:
            fh.write("through a link")
        results.append("WROTE through a symlink")
    except OSError as exc:
        results.append(f"denied symlink: {exc.strerror}")
    print(" | ".join(results), flush=True)


_attack()


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.relu_forward(x)
