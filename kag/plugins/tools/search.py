"""``glob`` and ``grep``: find files and text in the workspace (ripgrep-like, in pure Python).

Both skip hidden directories and build caches (``.git``, ``__pycache__``, ``build``) unless the
pattern names them, and never leave the workspace. Trusted side: they walk and read through
kag.core.trust.safefs, so links are skipped (and said so), never followed.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from pathlib import Path
from typing import Any, Iterator

from kag.plugin import Tool, ToolContext, ToolError, ToolOutput, hookimpl, safefs

SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", "node_modules", "build", ".kag"}
MAX_FILE_BYTES = 5 << 20


def _walk(ctx: ToolContext, base: Path, links: list[Path]) -> Iterator[Path]:
    """Regular files under ``base`` in name order, skipping caches; links go to ``links``, unfollowed."""
    try:
        for entry in safefs.walk(ctx.root, ctx.relative(base), skip=SKIP_DIRS):
            if entry.kind == "file":
                yield ctx.root / entry.rel
            elif entry.kind == "link":
                links.append(ctx.root / entry.rel)
    except (safefs.UnsafePathError, FileNotFoundError) as exc:
        raise ToolError(str(exc)) from None


def _links_note(links: list[Path]) -> str:
    if not links:
        return ""
    return (f"\n[{len(links)} symbolic link{'s' if len(links) != 1 else ''} skipped, not followed: "
            f"{safefs.NO_LINKS}]")


def _glob_match(rel: str, pattern: str) -> bool:
    """Glob with ``**`` spanning directories; a pattern without ``/`` matches the file name anywhere."""
    if "/" not in pattern:
        return fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], pattern)
    regex = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            regex += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            regex += ".*"
            i += 2
        elif pattern[i] == "*":
            regex += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            regex += "[^/]"
            i += 1
        else:
            regex += re.escape(pattern[i])
            i += 1
    return re.fullmatch(regex, rel) is not None


def _base(ctx: ToolContext, raw: str | None) -> tuple[Path, os.stat_result]:
    base = ctx.resolve(raw or ".")
    st = ctx.lstat(base)
    if st is None:
        raise ToolError(f"{raw} does not exist")
    if stat.S_ISLNK(st.st_mode):
        raise ToolError(f"{ctx.relative(base)} is a symbolic link: {safefs.NO_LINKS}")
    return base, st


class GlobTool(Tool):
    name = "glob"
    description = ("Find workspace files by glob pattern (e.g. 'kernels/*.cu', '**/*.py'; a pattern without '/' "
                   "matches file names at any depth). Returns paths relative to the workspace, sorted.")
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern."},
            "path": {"type": "string", "description": "Directory to search in (default: the workspace)."},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    truncate_keep = "head"
    truncate_hint = "use a narrower pattern"

    def __init__(self, max_output_chars: int | None = None, max_results: int = 500) -> None:
        super().__init__(max_output_chars)
        self.max_results = int(max_results)

    def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        base, st = _base(ctx, args.get("path"))
        if not stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{args.get('path')} is a file, not a directory")
        pattern = args["pattern"].strip()
        pattern = pattern[2:] if pattern.startswith("./") else pattern
        links: list[Path] = []
        hits = sorted(ctx.relative(p) for p in _walk(ctx, base, links)
                      if _glob_match(p.relative_to(base).as_posix(), pattern))
        note = _links_note([p for p in links if _glob_match(p.relative_to(base).as_posix(), pattern)])
        if not hits:
            return ToolOutput(f"no files match {pattern!r} under {ctx.relative(base)}{note}")
        more = len(hits) - self.max_results
        text = "\n".join(hits[: self.max_results])
        return ToolOutput(text + (f"\n[{more} more files not shown; narrow the pattern]" if more > 0 else "") + note)


class GrepTool(Tool):
    name = "grep"
    description = (
        "Search workspace files with a Python regular expression. output_mode: 'files_with_matches' (default, "
        "file paths), 'content' (matching lines as path:line:text, with -A/-B/-C context lines), or 'count'. "
        "Filter files with include (a glob such as '*.cu').")
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression (Python re syntax)."},
            "path": {"type": "string", "description": "File or directory to search (default: the workspace)."},
            "include": {"type": "string", "description": "Only files matching this glob, e.g. '*.cu' or 'kernels/**'."},
            "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]},
            "-A": {"type": "integer", "minimum": 0, "description": "Lines of context after each match (content mode)."},
            "-B": {"type": "integer", "minimum": 0, "description": "Lines of context before each match (content mode)."},
            "-C": {"type": "integer", "minimum": 0, "description": "Lines of context around each match (content mode)."},
            "-i": {"type": "boolean", "description": "Case-insensitive."},
            "head_limit": {"type": "integer", "minimum": 1, "description": "Show at most this many output lines."},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    truncate_keep = "head"
    truncate_hint = "narrow the pattern, use include, or set head_limit"

    def run(self, ctx: ToolContext, args: dict[str, Any]) -> ToolOutput:
        try:
            regex = re.compile(args["pattern"], re.IGNORECASE if args.get("-i") else 0)
        except re.error as exc:
            raise ToolError(f"invalid regular expression {args['pattern']!r}: {exc}") from None
        base, st = _base(ctx, args.get("path"))
        mode = args.get("output_mode") or "files_with_matches"
        include = args.get("include")
        ctx_n = args.get("-C")
        before = args.get("-B", ctx_n) or 0
        after = args.get("-A", ctx_n) or 0
        links: list[Path] = []
        files = list(_walk(ctx, base, links)) if stat.S_ISDIR(st.st_mode) else [base]
        out: list[str] = []
        total = 0
        for path in files:
            rel = ctx.relative(path)
            if include and not (_glob_match(path.relative_to(base).as_posix() if path != base else path.name, include)
                                or _glob_match(rel, include)):
                continue
            try:  # too big, or swapped for a link or a FIFO since it was listed: skipped
                data = ctx.read_bytes(path, MAX_FILE_BYTES)
            except ToolError:
                continue
            if b"\0" in data[:8192]:
                continue
            lines = data.decode("utf-8", errors="replace").splitlines()
            matched = [i for i, line in enumerate(lines) if regex.search(line)]
            if not matched:
                continue
            total += len(matched)
            if mode == "files_with_matches":
                out.append(rel)
            elif mode == "count":
                out.append(f"{rel}:{len(matched)}")
            else:
                out.extend(_context_block(rel, lines, matched, before, after))
        note = _links_note([p for p in links if not include or _glob_match(ctx.relative(p), include)
                            or _glob_match(p.relative_to(base).as_posix(), include)])
        if not out:
            return ToolOutput(f"no matches for {args['pattern']!r}{note}")
        limit = args.get("head_limit")
        if limit and len(out) > limit:
            out = out[:limit] + [f"[{len(out) - limit} more lines not shown (head_limit={limit})]"]
        if mode == "count":
            out.append(f"[{total} matches in {len(out)} files]")
        return ToolOutput("\n".join(out) + note)


def _context_block(rel: str, lines: list[str], matched: list[int], before: int, after: int) -> list[str]:
    """Lines as ``path:N:text`` for matches and ``path-N-text`` for context, groups split by ``--``."""
    hits = set(matched)
    out: list[str] = []
    last = -2
    for i in matched:
        lo, hi = max(0, i - before), min(len(lines) - 1, i + after)
        if (before or after) and last >= 0 and lo > last + 1:
            out.append("--")
        for j in range(max(lo, last + 1), hi + 1):
            sep = ":" if j in hits else "-"
            out.append(f"{rel}{sep}{j + 1}{sep}{lines[j]}")
        last = max(last, hi)
    return out


@hookimpl
def kag_register_tools(register) -> None:
    register("glob", GlobTool)
    register("grep", GrepTool)
