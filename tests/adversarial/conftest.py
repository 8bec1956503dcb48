"""Shared fixtures of the adversarial corpus: a plugin registry that includes the guards."""

from __future__ import annotations

import pytest

from kag.core.plugins import Plugins


def guard_plugins() -> Plugins:
    """The built-in plugins, the guards among them (kag.plugins.guards.GUARD_MODULES)."""
    return Plugins(load_entrypoints=False)


@pytest.fixture(scope="session")
def plugins() -> Plugins:
    return guard_plugins()
