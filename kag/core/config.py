"""``kag.toml``: per-project settings (plugin choices, dataset paths, plugin options).

Looked up in the current directory unless ``--config FILE`` names one. Example::

    [plugins]
    reward = "milestone"
    sandbox = "docker"

    [datasets.kernelbench]
    path = "/data/KernelBench"
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_NAME = "kag.toml"


class ConfigError(Exception):
    """A config file that cannot be used, with the file named."""


@attrs.frozen
class Config:
    path: Path | None = None
    data: dict[str, Any] = attrs.field(factory=dict)

    @property
    def plugins(self) -> dict[str, str]:
        table = self.data.get("plugins", {})
        if not isinstance(table, dict):
            raise ConfigError(f"{self.path}: [plugins] must be a table of KIND = \"NAME\"")
        return {str(k): str(v) if not isinstance(v, list) else ",".join(map(str, v)) for k, v in table.items()}

    def check_sections(self, kinds: tuple[str, ...]) -> None:
        """A section kag does not read (``[plugin]`` for ``[plugins]``) is an error, not ignored."""
        import difflib

        known = ["plugins", "train"] + [plural(k) for k in kinds]  # [train]: kag train's tables
        for name in self.data:
            if name not in known:
                near = difflib.get_close_matches(name, known, n=1)
                hint = f"did you mean [{near[0]}]? " if near else ""
                raise ConfigError(f"{self.path}: unknown section [{name}]; {hint}kag reads [plugins], [train] and plugin "
                                  f"option tables such as [datasets.NAME], [policies.NAME], [crawlers.NAME]")

    def options(self, kind_plural: str, name: str) -> dict[str, Any]:
        """Options for one plugin, from a ``[KINDS.NAME]`` table (e.g. ``[datasets.kernelbench]``)."""
        table = self.data.get(kind_plural, {}).get(name, {})
        return dict(table) if isinstance(table, dict) else {}


def plural(kind: str) -> str:
    """The section name of a plugin kind's option tables: policy -> policies, dataset -> datasets."""
    if kind.endswith("y"):
        return kind[:-1] + "ies"
    return kind + ("es" if kind.endswith(("s", "x")) else "s")


def parse_value(text: str) -> Any:
    """A command-line VALUE read the way kag.toml reads one (5, 0.7, true, "x", [1, 2], {k = 1}), so
    an option given on the command line means what it would in the file; else as JSON (null,
    {"k": 1}: forms TOML has not); else the text itself (paths, URLs, model names)."""
    import json

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        pass
    try:
        return json.loads(text)
    except ValueError:
        return text


def load_config(path: str | Path | None = None) -> Config:
    """Read ``path`` (must exist) or ``./kag.toml`` (optional)."""
    if path is None:
        candidate = Path.cwd() / CONFIG_NAME
        if not candidate.is_file():
            return Config()
        path = candidate
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist; pass an existing kag.toml to --config")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the file or pass another --config") from exc
    return Config(path=path, data=data)
