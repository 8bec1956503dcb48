"""Wheels for a Ray run on a machine without network, small enough to carry.

The device tool carries at most 64 MiB of ignored files, and the cp312 manylinux wheel of
ray 2.60.0 is 75.6 MiB, 30.7 MiB of it ``ray/jars/ray_dist.jar``: the Java worker, which a Python
cluster never starts. This downloads ray and its dependencies for the target Python, rewrites the
ray wheel without ``ray/jars/`` (its RECORD too) and prints the folder's size; then, there:

    python3 -m pip install --no-index --find-links .wheels ray

Usage: python3 bench/scripts/ray_wheels.py [--python 3.12] [--ray 2.60.0] [--out .wheels]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from pathlib import Path

DROP = "ray/jars/"


def slim(wheel: Path) -> Path:
    """The wheel without the Java worker, in place; RECORD lists only what is left."""
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename.startswith(DROP):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                data = b"".join(line for line in data.splitlines(keepends=True)
                                if not line.startswith(DROP.encode()))
            dst.writestr(info, data)
    tmp.replace(wheel)
    return wheel


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="3.12")
    ap.add_argument("--ray", default="2.60.0")
    ap.add_argument("--out", default=".wheels")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", f"ray=={args.ray}", "--python-version", args.python,
                    "--platform", "manylinux2014_x86_64", "--only-binary=:all:", "-d", str(out)], check=True)
    for wheel in out.glob("ray-*.whl"):
        before = wheel.stat().st_size
        slim(wheel)
        print(f"{wheel.name}: {before / 2**20:.1f} MiB -> {wheel.stat().st_size / 2**20:.1f} MiB")
    total = sum(p.stat().st_size for p in out.iterdir())
    print(f"{out}: {len(list(out.iterdir()))} wheels, {total / 2**20:.1f} MiB (the carry limit is 64 MiB)")


if __name__ == "__main__":
    main()
