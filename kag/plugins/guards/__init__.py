"""Anti-reward-hacking guards: one module per guard, each registered under its name."""

from kag.plugin import DEFAULT_PLUGINS

# The guard modules among the built-ins: DEFAULT_PLUGINS is the one list of built-in plugins.
GUARD_MODULES: tuple[str, ...] = tuple(m for m in DEFAULT_PLUGINS if m.startswith(f"{__name__}."))
