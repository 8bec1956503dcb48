"""Which tasks a remote client may name (trusted side: ``kag serve --http``).

A label is what OpenRLHF sends as ``labels[i]`` and ``/evaluate`` as ``"task"``. The server runs a
task's ``Model`` as the reference, and reading a file is already an answer (its error says whether it
exists and how it parses), so a client may name only:

- a dataset id (``kernelbench:level1/19``): the dataset plugin reads its own data, where the server's
  ``kag.toml`` or environment put it; the id's grammar has no room for a path;
- a task file inside a task root the server was started with (``--task-root DIR``), named relative
  to the root or by a path that resolves inside it (symbolic links are followed first, so a link in
  a root that points out of it is refused too).

Anything else is refused before the file system is touched beyond ``realpath``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

from kag.core.tasks import TaskError


class TaskLabels:
    """``labels(label) -> Task`` for labels inside ``roots`` or a dataset; TaskError (one line,
    the fix named) otherwise. ``load(spec) -> Task`` is ``kag.load_task`` with the server's plugins."""

    def __init__(self, roots: Sequence[str | os.PathLike[str]], load: Callable[[str], Any]):
        self.roots = [Path(os.path.realpath(r)) for r in roots]
        for root in self.roots:
            if not root.is_dir():
                raise TaskError(f"--task-root {root}: not a directory; pass the folder holding the task files")
        self.load = load

    def __call__(self, label: str) -> Any:
        from kag.api import DATASET_ID

        if DATASET_ID.match(label):
            return self.load(label)
        if "\0" in label:
            raise TaskError("a label holds no NUL byte")
        if not self.roots:
            raise TaskError("not a dataset id (like kernelbench:level1/19), and this server serves no task files; "
                            "start it with --task-root DIR to serve the task files under DIR")
        roots = ", ".join(map(str, self.roots))
        path, escaped = self.inside(label)
        if path is not None:
            return self.load(str(path))
        if escaped:
            raise TaskError(f"not a dataset id (like kernelbench:level1/19) nor a task file under a task root "
                            f"({roots}); name a file relative to a root")
        raise TaskError(f"no such file under the task roots ({roots})")

    def inside(self, label: str) -> tuple[Path | None, bool]:
        """(the real path of the file ``label`` names under a root, or None; whether some reading
        of it led out of every root). A relative label is tried against each root in order."""
        given = Path(label)
        candidates = [given] if given.is_absolute() else [root / given for root in self.roots]
        escaped = False
        for candidate in candidates:
            real = Path(os.path.realpath(candidate))
            if not any(real.is_relative_to(root) for root in self.roots):
                escaped = True
            elif real.is_file():
                return real, False
        return None, escaped
