"""The repository's layout rules: code says what a thing is, not which work item or work session
brought it; bench/ is scripts a stranger can rerun and results that say how they were made.

- No file under kag/, tests/, examples/, bench/scripts/ or .ci/ names an issue or a session by its
  number (an issue's number in a comment means nothing to a reader of the code; say what it is).
- Every shell script in bench/scripts/ runs outside the project's device harness: a variable it
  reads is set in the script (or in env.sh, which it sources) or has a default, and no path that
  only the harness carries (.kb, .whl, .wheels, .old) is used without a variable to override it.
  Each says at its top what it needs and what it writes.
- bench/ holds README.md, scripts/ and results/; every results folder is named by its date and has
  a README.md.

ALLOWED lists what another change is editing now; it is to be emptied, not grown.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# A work item or work session named by its number: "issue 7", "Issue #7", "issue7", "session 3",
# "session3", "stop 9" (a numbered stop of the work).
LABEL = re.compile(r"\b[Ii]ssues? ?#?\d+|\b[Ss]essions? ?#?\d+|\b[Ss]top \d+\b|\b[Ii]ssue[_-]\d|\b[Ss]ession[_-]\d")
SCANNED = ("kag", "tests", "examples", "bench/scripts", ".ci")
TEXT_SUFFIXES = {".py", ".sh", ".toml", ".md", ".txt", ".cu", ".cuh", ".cpp", ".c", ".h", ".json", ".cfg",
                 ".ini", ".yaml", ".yml", ""}
SKIPPED_DIRS = {"__pycache__", "build", "dist", "runs"}

# Being edited elsewhere; each entry goes once its file is clean (a folder covers everything under it).
ALLOWED: set[str] = set()

# Variables a shell script may read without setting them: the shell's and the system's own.
SHELL_VARS = {"PATH", "HOME", "PWD", "OLDPWD", "TMPDIR", "PYTHONPATH", "USER", "SHELL", "LANG", "IFS", "UID",
              "PPID", "RANDOM", "SECONDS", "BASH_SOURCE", "HOSTNAME"}
CARRIED_PATH = re.compile(r"(?:^|[\s\"'=(/])\.(kb|whl|wheels|old)(?![\w.-])")


def allowed(rel: str) -> bool:
    return any(rel == a or (a.endswith("/") and rel.startswith(a)) for a in ALLOWED)


def scanned_files() -> list[Path]:
    files = []
    for top in SCANNED:
        for path in (REPO / top).rglob("*"):
            rel = path.relative_to(REPO)
            if not path.is_file() or path.suffix not in TEXT_SUFFIXES or path.stat().st_size > 2_000_000:
                continue
            if any(part in SKIPPED_DIRS or part.endswith(".egg-info") or (part.startswith(".") and part != ".ci")
                   for part in rel.parts[:-1]):
                continue
            files.append(path)
    return files


def test_no_file_names_an_issue_or_a_session_by_number():
    found = []
    for path in scanned_files():
        rel = path.relative_to(REPO).as_posix()
        if allowed(rel) or rel == "tests/test_repo_layout.py":
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for match in LABEL.finditer(line):
                found.append(f"{rel}:{number}: {match.group(0)!r} in: {line.strip()[:100]}")
    assert not found, ("say what the thing is instead of which issue or session brought it:\n"
                       + "\n".join(found))


def test_the_allow_list_names_files_that_exist():
    missing = [a for a in ALLOWED if not (REPO / a).exists()]
    assert not missing, f"ALLOWED names files that are gone (drop them): {missing}"


def _without_quoted_heredocs(text: str) -> str:
    """The script less the bodies of <<'EOF' heredocs (no shell expansion happens in them)."""
    kept, end = [], None
    for line in text.splitlines():
        if end is not None:
            if line.strip() == end:
                end = None
            continue
        quoted = re.search(r"<<-?\s*'(\w+)'", line)
        if quoted:
            end = quoted.group(1)
        kept.append(line)
    return "\n".join(kept)


def _code(line: str) -> str:
    stripped = line.lstrip()
    if stripped.startswith("#") and not stripped.startswith("#!"):
        return ""
    return re.split(r"\s#\s", line, maxsplit=1)[0]


def _assigned(text: str) -> set[str]:
    names = set(re.findall(r"(?:^|[\s;(&|])(?:export\s+|local\s+|readonly\s+)?([A-Za-z_]\w*)=", text, re.M))
    names |= set(re.findall(r"\bfor\s+([A-Za-z_]\w*)\s+in\b", text))
    names |= set(re.findall(r"\bread\s+(?:-\w+\s+)*([A-Za-z_]\w*)", text))
    names |= set(re.findall(r"\$\{([A-Za-z_]\w*):?=", text))
    return names


def shell_scripts() -> list[Path]:
    scripts = sorted((REPO / "bench" / "scripts").rglob("*.sh"))
    assert scripts, "no shell scripts found under bench/scripts"
    return scripts


def test_bench_shell_scripts_read_no_variable_without_a_default():
    env_sh = _without_quoted_heredocs((REPO / "bench" / "scripts" / "env.sh").read_text())
    problems = []
    for script in shell_scripts():
        rel = script.relative_to(REPO).as_posix()
        body = _without_quoted_heredocs(script.read_text())
        defined = _assigned(body) | SHELL_VARS
        if re.search(r"^\s*(source|\.)\s+.*\benv\.sh\b", body, re.M):
            defined |= _assigned(env_sh)
        for number, line in enumerate(body.splitlines(), 1):
            code = _code(line)
            for match in re.finditer(r"\$\{([A-Za-z_]\w*)(:?[-=+?][^}]*)?\}|\$([A-Za-z_]\w*)", code):
                name = match.group(1) or match.group(3)
                if not match.group(2) and name not in defined:
                    problems.append(f"{rel}:{number}: ${name} is read without a default")
            if allowed(rel):
                continue
            for match in CARRIED_PATH.finditer(re.sub(r"\$\{\w+:?[-=][^}]*\}", "", code)):
                problems.append(f"{rel}:{number}: the carried path .{match.group(1)} has no variable to override it")
    assert not problems, "\n".join(problems)


def test_bench_shell_scripts_say_what_they_need_and_what_they_write():
    missing = []
    for script in shell_scripts():
        rel = script.relative_to(REPO).as_posix()
        if script.name == "env.sh" or allowed(rel):
            continue
        head = "\n".join(script.read_text().splitlines()[:30])
        for word in ("Needs:", "Writes:"):
            if word not in head:
                missing.append(f"{rel}: no '{word}' in its first 30 lines")
    assert not missing, "\n".join(missing)


def test_bench_holds_scripts_results_and_its_index_only():
    names = {p.name for p in (REPO / "bench").iterdir()} - {"out"}  # out/: scripts' default output, ignored
    assert names == {"README.md", "scripts", "results"}, sorted(names)
    folders = [p for p in (REPO / "bench" / "results").iterdir() if p.is_dir()]
    assert folders
    for folder in folders:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}-[a-z0-9-]+", folder.name), folder.name
        assert not LABEL.search(folder.name.replace("-", " ")), folder.name
        assert (folder / "README.md").is_file(), f"{folder.name} has no README.md"
