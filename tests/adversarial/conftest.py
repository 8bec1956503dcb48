"""Shared fixtures of the adversarial corpus: a plugin registry that includes the guards."""

from __future__ import annotations

import pytest

from kag.core.plugins import DEFAULT_PLUGINS, Plugins
from kag.plugins.guards import GUARD_MODULES


def guard_plugins() -> Plugins:
    """The built-in plugins plus the guard modules (whether or not they are in DEFAULT_PLUGINS yet)."""
    extra = tuple(m for m in GUARD_MODULES if m not in DEFAULT_PLUGINS)
    return Plugins(load_entrypoints=False, builtins=DEFAULT_PLUGINS + extra)


@pytest.fixture(scope="session")
def plugins() -> Plugins:
    return guard_plugins()
