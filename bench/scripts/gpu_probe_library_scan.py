"""What the fatbin wall's library scan finds on a machine with CUDA (the scan covered only
site-packages and the CUDA toolkit; it now covers every folder a candidate may read).

Reports: the roots scanned, the seconds of an uncached scan and of a cached one, every library with
GPU code found (and whether it lies outside the old roots), which of them the wall allows, whether
the driver (libcuda) has GPU code of its own, and how many Landlock rules the candidate's read
paths become once those libraries are left out.

    python bench/scripts/gpu_probe_library_scan.py     # library_scan.json to $OUT when set
"""

from __future__ import annotations

import ctypes.util
import glob
import json
import os
import site
import sys
import tempfile
import time

from kag.core.trust import confine, fatbin_wall


def main() -> None:
    roots = fatbin_wall.library_roots()
    cache = tempfile.mkdtemp()
    t0 = time.perf_counter()
    sections = fatbin_wall.fatbin_sections(cache)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    fatbin_wall.fatbin_sections(cache)
    warm = time.perf_counter() - t0
    old_roots = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    old_roots += site.getsitepackages() + ["/usr/local/cuda/lib64", "/usr/local/cuda/targets"]
    old_roots = [os.path.realpath(r) for r in old_roots if os.path.isdir(r)]
    found = [{"path": p, "fatbin_mb": round(s[1] / 2**20, 1), "allowed": fatbin_wall.allowed(p, True, True),
              "outside_old_roots": not any(p.startswith(r + "/") for r in old_roots)} for p, s in sections.items()]
    drivers = sorted({os.path.realpath(p) for p in glob.glob("/usr/lib/x86_64-linux-gnu/libcuda.so*")
                      + glob.glob("/usr/lib64/libcuda.so*") + [ctypes.util.find_library("cuda") or ""] if p})
    unreadable = fatbin_wall.fatbin_files()
    t0 = time.perf_counter()
    rules = confine.readable_except(confine.system_read_paths(), unreadable)
    rules_s = time.perf_counter() - t0
    out = {"roots": roots, "scan_cold_s": round(cold, 2), "scan_cached_s": round(warm, 3),
           "libraries": found, "outside_old_roots": sum(1 for f in found if f["outside_old_roots"]),
           "driver": {p: fatbin_wall.elf_section(p) for p in drivers if os.path.isfile(p)},
           "unreadable": len(unreadable), "landlock_rules": len(rules), "rules_s": round(rules_s, 3)}
    print(json.dumps({k: v for k, v in out.items() if k != "libraries"}, indent=1))
    for f in found:
        print(f"{f['fatbin_mb']:8.1f} MB  {'allowed ' if f['allowed'] else 'walled  '}"
              f"{'NEW ' if f['outside_old_roots'] else '    '}{f['path']}")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "library_scan.json"), "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
