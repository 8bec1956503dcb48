"""``kernel-choice``: pick one of a task's prepared solutions; the trusted evaluator scores the pick.

Why it exists: a learning check of the whole RL path on real kernels that a tiny model can pass.
Writing a kernel is far beyond a model of 100k parameters, but choosing among a few written ones is
not, and every choice is still built, checked and timed by the judge, with the reward plugin's
value as is (the milestone: -1 / 1 / 2 / 3). A policy that learns here has learned from the
evaluator's verdicts, timing noise, build failures and guards included.

A task folder (``path`` option) holds one folder per task: ``TASK/model.py`` (KernelBench format)
and ``TASK/variants/NAME/`` (``model_new.py`` + ``kernels/``), for example
``examples/train/kernel_choice`` (fast, slow, wrong, broken and fallback variants of three
reductions). The variants are offered by letter, in an order fixed per task by ``shuffle_seed``,
so the right letter differs between tasks and the policy must read which task it has.
``prompt = "names"`` (default) shows only the task's name and the letters (for tiny models);
``"code"`` shows the task's source and every option's files (a code-reading task for a real model).

Trusted side: runs in the trainer; the variants are read from disk here and scored by
``kag.core.eval`` exactly as ``kag score`` scores a solution folder.
"""

from __future__ import annotations

import hashlib
import random
import re
import string
from pathlib import Path
from typing import Any

from kag.plugin import Message, Solution, StepResult, Task, hookimpl
from kag.plugins.environments.kernel_env import KernelEnvBase

PROMPTS = ("names", "code")


def read_choices(path: Path) -> tuple[dict[str, Task], dict[str, dict[str, Solution]]]:
    """Tasks and their variants from ``path/TASK/{model.py, variants/NAME/}``, with a clear error
    naming the folder when one is missing."""
    from kag.plugin import read_solution
    from kag.plugin import read_text

    if not path.is_dir():
        raise ValueError(f"kernel-choice: {path} is not a folder; set path to a folder of TASK/model.py + "
                         f"TASK/variants/NAME/ (e.g. examples/train/kernel_choice)")
    tasks: dict[str, Task] = {}
    variants: dict[str, dict[str, Solution]] = {}
    for folder in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        model, vdir = folder / "model.py", folder / "variants"
        if not model.is_file() or not vdir.is_dir():
            raise ValueError(f"kernel-choice: {folder} needs model.py and variants/NAME/ folders (model_new.py + "
                             f"kernels/); add them or remove the folder")
        tasks[folder.name] = Task(name=folder.name, source="local", code=read_text(model), path=str(model))
        variants[folder.name] = {v.name: read_solution(v) for v in sorted(vdir.iterdir()) if v.is_dir()}
        if not 2 <= len(variants[folder.name]) <= 26:
            raise ValueError(f"kernel-choice: {vdir} holds {len(variants[folder.name])} variants; give 2 to 26")
    if not tasks:
        raise ValueError(f"kernel-choice: {path} holds no task folder (TASK/model.py + TASK/variants/)")
    return tasks, variants


def letter_order(task: str, names: list[str], seed: int) -> list[str]:
    """The variants in the order they get letters a, b, c, ...: fixed per (task, seed), any Python."""
    digest = hashlib.sha256(f"{seed}:{task}".encode()).digest()
    order = sorted(names)
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return order


class KernelChoiceEnv(KernelEnvBase):
    """One message, one letter: the chosen variant goes to the trusted evaluator."""

    def __init__(self, path: str | None = None, prompt: str = "names", shuffle_seed: int = 0, **options: Any):
        if not path:
            raise ValueError('kernel-choice: set path = "examples/train/kernel_choice" (or your own folder) in '
                             '[environments.kernel-choice]')
        if prompt not in PROMPTS:
            raise ValueError(f"kernel-choice: prompt must be one of {', '.join(PROMPTS)}, got {prompt!r}")
        self.path, self.prompt, self.shuffle_seed = Path(path).expanduser(), prompt, int(shuffle_seed)
        tasks, self.variants = read_choices(self.path)
        super().__init__(tasks=tasks, **options)
        self.letters: dict[str, list[str]] = {
            name: letter_order(name, list(self.variants[name]), self.shuffle_seed) for name in self.tasks}

    def options_of(self, task: str) -> dict[str, str]:
        """letter -> variant name for ``task``."""
        return dict(zip(string.ascii_lowercase, self.letters[task]))

    def reset(self, task: Any) -> list[Message]:
        self.task, self.done, self.last_result = self._task(task), False, None
        letters = " ".join(self.options_of(self.task.name))
        if self.prompt == "names":
            return [Message("user", f"task {self.task.name}. options {letters}. answer one letter.")]
        parts = [f"Which solution of this task is correct and fastest? Answer with its letter only.\n\n"
                 f"# model.py\n```python\n{self.task.code}\n```"]
        for letter, name in self.options_of(self.task.name).items():
            sol = self.variants[self.task.name][name]
            files = [f"```python model_new.py\n{sol.model_new}\n```"]
            files += [f"```cpp kernels/{rel}\n{text}\n```" for rel, text in sorted(sol.kernels.items())]
            parts.append(f"# option {letter}\n" + "\n".join(files))
        return [Message("user", "\n\n".join(parts))]

    def step(self, action: str) -> StepResult:
        if self.task is None or self.done:
            raise RuntimeError("kernel-choice: step() before reset() or after the episode ended")
        choices = self.options_of(self.task.name)
        match = re.fullmatch(r"[\W_]*([A-Za-z])[\W_]*", action)  # the reply is one letter (punctuation aside)
        letter = match.group(1).lower() if match else ""
        if letter not in choices:
            return self._failure(f"expected one of {' '.join(choices)}, got {action.strip()[:20]!r}")
        name = choices[letter]
        return self._scored(self.variants[self.task.name][name], {"choice": letter, "variant": name})


@hookimpl
def kag_register_environments(register) -> None:
    register("kernel-choice", KernelChoiceEnv)
