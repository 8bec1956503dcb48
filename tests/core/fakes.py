"""A backend whose "compiler" copies files: the real build path (out dir, cache, link) in milliseconds.

For tests about where a build reads and writes, not about compilers.
"""

from __future__ import annotations

from kag.core.hookspecs import hookimpl


class CopyBackend:
    """compile = cp SOURCE OBJ, link = cat OBJECTS > OUT; every file kind is accepted.

    A source holding ``#error`` fails to compile and is quoted whole in the log, as a compiler
    quotes the line of an error: the way a host file read into a solution would reach the agent.
    """

    name = "copy"
    device = "cpu"

    def __init__(self, **_: object) -> None:
        pass

    @staticmethod
    def check_available() -> str | None:
        return None

    def toolchain_id(self) -> str:
        return "copy-backend"

    def source_kind(self, rel: str) -> str:
        return "copy"

    def compile_command(self, kind: str, source: str, obj: str) -> list[str]:
        return ["sh", "-c", 'if grep -q "#error" "$1"; then cat "$1"; exit 1; fi; cp "$1" "$2"', "cc", source, obj]

    def link_command(self, objects: list[str], out: str, sources_text: str) -> list[str]:
        return ["sh", "-c", 'out="$1"; shift; cat "$@" > "$out"', "link", out, *objects]


class CopyBackendPlugin:
    @hookimpl
    def kag_register_backends(self, register) -> None:
        register("copy", CopyBackend)
