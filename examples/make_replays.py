"""Write a replay script (the `replay` policy's input) for every example solution.

Each script plays what a good agent does: read the starter model_new.py, write the kernels and
model_new.py, compile, verify, profile, and stop. Output: examples/NAME/{cpu,cuda}/replay.json and
examples/replays/cuda/<KernelBench task name>.json for `kag eval --policy replay`.
Run: python examples/make_replays.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def script_for(solution: Path) -> list[dict]:
    steps: list[dict] = [{"tool": "read", "args": {"path": "model_new.py"}}]
    for kernel in sorted((solution / "kernels").glob("*")):
        steps.append({"tool": "write", "args": {"path": f"kernels/{kernel.name}", "content": kernel.read_text()}})
    steps += [
        {"tool": "write", "args": {"path": "model_new.py", "content": (solution / "model_new.py").read_text()}},
        {"tool": "bash", "args": {"command": "bash utils/compile.sh"}},
        {"tool": "bash", "args": {"command": "python3 utils/verification.py"}},
        {"tool": "bash", "args": {"command": "python3 utils/profiling.py"}},
        {"content": "The kernel compiles, passes verification and was profiled; done."},
    ]
    return steps


def main() -> None:
    for example in sorted(p for p in HERE.iterdir() if (p / "task.txt").exists()):
        task = (example / "task.txt").read_text().strip().removesuffix(".py")
        for backend in ("cpu", "cuda"):
            solution = example / backend
            if not (solution / "model_new.py").exists():
                continue
            text = json.dumps(script_for(solution), indent=1) + "\n"
            (solution / "replay.json").write_text(text)
            if backend == "cuda":
                target = HERE / "replays" / "cuda" / f"{task}.json"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
            print(f"{solution.relative_to(HERE)}/replay.json")


if __name__ == "__main__":
    main()
