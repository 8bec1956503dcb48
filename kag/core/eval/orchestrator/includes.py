"""Which of a solution's kernel files one compile unit reads: its ``#include`` directives, transitively.

Evaluator side (trusted): reads the solution's text, never runs it. A unit's compile tree holds only
the files found here, and its cache key covers exactly those, so a miss can never let the compiler
read an unkeyed file; it can only fail that compile ("No such file"). The scan therefore errs on the
generous side (a directive in a raw string or a disabled ``#if`` still counts; a name matches any
kernels/ file it could resolve to), while a name in a comment or an ordinary string pulls in nothing:
a binding whose comment says "Torch-facing side of relu.cu" no longer recompiles with relu.cu.
"""

from __future__ import annotations

import posixpath
import re

# a directive that reads a file (C23's #embed and GCC's #include_next and #import too), and
# __has_include in a condition, with the name in quotes or angle brackets
_DIRECTIVE = re.compile(r'^[ \t]*#[ \t]*(?:include|include_next|import|embed)[ \t]*([<"])([^>"\n]+)[>"]', re.M)
_HAS_INCLUDE = re.compile(r'__has_include(?:_next)?[ \t]*\([ \t]*([<"])([^>"\n]+)[>"]')
_RAW_DELIM = re.compile(r'([^()\\ \t\n"]{0,16})\(')


def _raw_string_at(text: str, quote: int) -> bool:
    """Whether the ``"`` at ``quote`` opens a raw string: ``R"``, ``u8R"``, ``LR"``..., not ``fooR"``."""
    if quote == 0 or text[quote - 1] != "R":
        return False
    start = quote - 1
    if text[max(0, start - 2):start] == "u8":
        start -= 2
    elif start > 0 and text[start - 1] in "uUL":
        start -= 1
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_")


def strip_comments(text: str) -> str:
    """``text`` with comments blanked (newlines kept) and line continuations joined; string and
    character literals are kept as they are (an include's name is one). Ordinary literals end at
    a newline, so a misread quote (``1'000``) cannot hide the lines after it."""
    text = text.replace("\\\r\n", "").replace("\\\n", "")
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            body = text[i:n if end < 0 else end + 2]
            out.append(" " + "\n" * body.count("\n"))
            i = n if end < 0 else end + 2
        elif c == '"' or c == "'":
            delim = _RAW_DELIM.match(text, i + 1) if c == '"' and _raw_string_at(text, i) else None
            if delim is not None:  # R"d( ... )d": quotes, slashes and newlines inside are text
                end = text.find(f"){delim.group(1)}\"", delim.end())
                stop = n if end < 0 else end + len(delim.group(1)) + 2
            else:
                stop = i + 1
                while stop < n and text[stop] not in (c, "\n"):
                    stop += 2 if text[stop] == "\\" else 1
                stop = min(n, stop + 1) if stop < n and text[stop] == c else min(n, stop)
            out.append(text[i:stop])
            i = stop
        else:
            j = i
            while j < n and text[j] not in "/\"'":
                j += 1
            out.append(text[i:max(j, i + 1)])
            i = max(j, i + 1)
    return "".join(out)


def included_names(text: str) -> list[str]:
    """The file names ``text`` includes (``"a.cuh"``, ``<kernels/b.h>``), comments ignored."""
    code = strip_comments(text)
    return [m.group(2).strip() for pattern in (_DIRECTIVE, _HAS_INCLUDE) for m in pattern.finditer(code)]


def resolve(name: str, includer: str, kernels: dict[str, str] | set[str]) -> set[str]:
    """The kernels/ files (paths relative to kernels/) an include of ``name`` from ``includer``
    could open: next to the includer, under the tree root (``-I.``: ``kernels/x.cuh``), or any
    file whose path ends with the name (generous: a miss fails the compile, an extra costs a
    cache miss)."""
    found = set()
    for candidate in (posixpath.join(posixpath.dirname(includer), name), name,
                      name[len("kernels/"):] if name.startswith("kernels/") else None):
        if candidate is not None:
            path = posixpath.normpath(candidate)
            if path in kernels:
                found.add(path)
    tail = posixpath.normpath(name)
    found.update(r for r in kernels if r == tail or r.endswith("/" + tail))
    return found


def unit_inputs(rel: str, kernels: dict[str, str]) -> dict[str, str]:
    """``rel`` and every kernels/ file it includes, transitively."""
    chosen, todo = {rel}, [rel]
    while todo:
        current = todo.pop()
        for name in included_names(kernels[current]):
            for path in sorted(resolve(name, current, kernels) - chosen):
                chosen.add(path)
                todo.append(path)
    return {r: kernels[r] for r in sorted(chosen)}
