"""One kag.toml for PPO's stages and a plugin's algorithm: ``[train.NAME]`` of a registered
algorithm is that algorithm's, not an unknown PPO key; an unregistered table is still an error."""

from __future__ import annotations

import pytest

from kag.core.hookspecs import hookimpl
from kag.core.plugins import Plugins
from kag.plugins.algorithms.ppo.config import train_config_from_dict

DATA = {"train": {"steps": 3, "warmup": {"steps": 2}, "best-of-n": {"n": 4, "tasks": 10}}}


class BestOfN:
    @hookimpl
    def kag_register_algorithms(self, register):
        register("best-of-n", lambda **_: None)


def test_a_registered_algorithms_table_is_left_to_it():
    plugins = Plugins()
    plugins.register_plugin(BestOfN(), "best-of-n")
    config = train_config_from_dict("warmup", DATA, where="kag.toml", algorithms=plugins.names("algorithm"))
    assert config.steps == 2


def test_an_unregistered_table_is_still_an_unknown_key():
    with pytest.raises(ValueError, match="kag.toml: unknown \\[train\\] key\\(s\\) best-of-n"):
        train_config_from_dict("warmup", DATA, where="kag.toml", algorithms=Plugins().names("algorithm"))
