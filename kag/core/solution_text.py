"""Reading a model's answer text as a solution: kag's fenced files, or a KernelBench single file.

Trusted side: text only, nothing is run. ``parse_solution_blocks`` is the strict reader of kag's
format (every file in a fenced block labelled by its path); ``parse_completion`` also takes what a
model prompted the KernelBench way writes (one ```python block holding a ``ModelNew`` that builds
its kernels with ``load_inline``), which the evaluator turns into a solution
(``kag.core.eval.orchestrator.single_file``). The RL adapters (``kag.reward``) and ``kag.evaluate`` use it.
"""

from __future__ import annotations

import ast
import re
from pathlib import PurePosixPath

from kag.core.records import Solution

KERNEL_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp")
_ANY_BLOCK = re.compile(r"^\s*(`{3,})[^\n]*\n(.*?)^\s*\1\s*$", re.MULTILINE | re.DOTALL)


class AnswerFormatError(ValueError):
    """A single-turn answer whose files cannot be read; the message says what to fix."""




def parse_solution_blocks(text: str) -> Solution:
    """The solution in an answer's fenced blocks (```LANG PATH or ```PATH); strict about paths.

    Raises AnswerFormatError for: no blocks, a block without a path, a path other than
    model_new.py or kernels/*.{cu,cpp,h,...}, a duplicate path, an unclosed block, no model_new.py.
    """
    files: dict[str, str] = {}
    fence: str | None = None
    path, body, line_no = "", [], 0
    for line_no, line in enumerate(text.splitlines(), 1):
        if fence is None:
            opened = re.match(r"^\s*(`{3,})(.*)$", line)
            if not opened:
                continue
            fence, path, body = opened.group(1), _block_path(opened.group(2), line_no), []
        elif line.strip() == fence:
            if path in files:
                raise AnswerFormatError(f"{path} appears twice; give each file once")
            files[path] = "\n".join(body) + "\n"
            fence = None
        else:
            body.append(line)
    if fence is not None:
        raise AnswerFormatError(f"the block for {path} (opened before line {line_no}) is never closed with {fence}")
    if not files:
        raise AnswerFormatError("no fenced files found; put model_new.py in a block opened with ```python model_new.py")
    if "model_new.py" not in files:
        raise AnswerFormatError(f"no model_new.py block (got {', '.join(sorted(files))}); "
                                f"open it with ```python model_new.py")
    kernels = {p[len("kernels/"):]: code for p, code in files.items() if p != "model_new.py"}
    return Solution(model_new=files["model_new.py"], kernels=kernels)


def _block_path(info: str, line_no: int) -> str:
    tokens = info.split()
    if not tokens or len(tokens) > 2 or (len(tokens) == 1 and "." not in tokens[0]):
        raise AnswerFormatError(f"line {line_no}: a fenced block must be labelled with its path, like "
                                f"```python model_new.py or ```cuda kernels/foo.cu (got {info.strip()!r})")
    raw = tokens[-1].removeprefix("./")
    rel = PurePosixPath(raw)
    if raw == "model_new.py":
        return raw
    if (raw.startswith("kernels/") and len(rel.parts) > 1 and ".." not in rel.parts
            and rel.suffix in KERNEL_SUFFIXES):
        return rel.as_posix()
    raise AnswerFormatError(f"line {line_no}: {raw!r} is not a solution file; only model_new.py and "
                            f"kernels/NAME{{{','.join(KERNEL_SUFFIXES)}}} are accepted")


def defines_model_new(code: str) -> bool:
    """Whether ``code`` is Python that defines ``class ModelNew`` at module level."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.ClassDef) and node.name == "ModelNew" for node in tree.body)


def parse_completion(text: str) -> Solution:
    """The solution in a model's completion: kag's fenced files first; else the last fenced block
    (or the whole text) that defines ``class ModelNew``, as a KernelBench single-file solution.

    Raises AnswerFormatError, with kag's format error when neither form is there."""
    try:
        return parse_solution_blocks(text)
    except AnswerFormatError as exc:
        strict_error = exc
    for match in reversed(list(_ANY_BLOCK.finditer(text))):
        if defines_model_new(match.group(2)):
            return Solution(model_new=match.group(2))
    if defines_model_new(text):
        return Solution(model_new=text if text.endswith("\n") else text + "\n")
    raise AnswerFormatError(f"{strict_error}; or give one ```python block with a single-file class ModelNew "
                            f"(KernelBench style, kernels built with load_inline)")
