"""kag.plugin is the one door from a plugin into kag: every shipped plugin comes through it, every name it
lists resolves, and opening it imports nothing of the core until a name is asked for."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import kag.plugin

ROOT = Path(__file__).resolve().parents[1]


def _kag_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m == "kag" or m.startswith("kag.")}


def test_every_shipped_plugin_imports_kag_only_through_kag_plugin():
    offenders = {}
    for path in sorted((ROOT / "kag" / "plugins").rglob("*.py")):
        bad = {m for m in _kag_imports(path) if m != "kag.plugin" and not m.startswith("kag.plugins")}
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert not offenders, f"import these through kag.plugin (add the name there if it is missing): {offenders}"


def test_the_core_imports_no_plugin_anywhere():
    """The door opens one way: no core module imports a plugin, at module level or inside a function
    (a plugin's data the core needs lives in the core; kag.core.plugins names the built-ins as strings)."""
    offenders = {}
    for path in sorted((ROOT / "kag" / "core").rglob("*.py")):
        bad = {m for m in _kag_imports(path) if m.startswith("kag.plugins")}
        if bad:
            offenders[str(path.relative_to(ROOT))] = sorted(bad)
    assert not offenders, f"move what these need into kag.core: {offenders}"


def test_every_public_name_resolves_and_is_declared_for_type_checkers():
    for name in kag.plugin.__all__:
        assert getattr(kag.plugin, name) is not None, name
    tree = ast.parse(Path(kag.plugin.__file__).read_text())
    typed = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.If)
             for stmt in node.body if isinstance(stmt, ast.ImportFrom) for alias in stmt.names}
    assert typed | {"KAG_VERSION", "PACKAGE_DIR"} == set(kag.plugin.__all__)


def test_an_unknown_name_says_where_the_public_ones_are():
    try:
        kag.plugin.judge_main  # noqa: B018 - internal: not part of the API
    except AttributeError as exc:
        assert "kag.plugin.__all__" in str(exc)
    else:
        raise AssertionError("an internal name was served")


def test_opening_it_imports_no_core_module():
    code = ("import sys, kag.plugin\n"
            "print(sorted(m for m in sys.modules if m.startswith('kag.core')))\n"
            "from kag.plugin import hookimpl\n"
            "print(sorted(m for m in sys.modules if m.startswith('kag.core')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "[]"
    assert "'kag.core.hookspecs'" in out[1] and "kag.core.eval" not in out[1]
