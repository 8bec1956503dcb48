import multiprocessing as mp

import pytest

from kag.core.hookspecs import KINDS, hookimpl
from kag.core.plugins import KIND_DEFAULTS, PluginError, Plugins, parse_plugin_options


def test_builtins_register_through_hooks():
    pl = Plugins(load_entrypoints=False)
    assert {"kernelbench", "ops6k", "local"} <= set(pl.names("dataset"))
    assert {"milestone", "speedup"} <= set(pl.names("reward"))
    entry = pl.entry("reward", "milestone")
    assert entry.origin == "built-in"
    assert entry.plugin == "kag.plugins.rewards.milestone"


def test_unknown_kind_and_name_list_the_valid_ones():
    pl = Plugins(load_entrypoints=False)
    with pytest.raises(PluginError, match="the reward plugins are: .*milestone.*speedup"):
        pl.entry("reward", "nope")
    with pytest.raises(PluginError, match="unknown plugin kind 'rewards'; the kinds are: dataset"):
        pl.select({"rewards": "milestone"})
    with pytest.raises(PluginError, match="KIND=NAME"):
        parse_plugin_options(["reward"])


def test_selection_defaults_and_overrides():
    pl = Plugins(load_entrypoints=False)
    assert pl.selected("reward") == KIND_DEFAULTS["reward"] == "milestone"
    pl.select({"reward": "speedup"})
    assert pl.selected("reward") == "speedup"
    assert pl.create("reward").name == "speedup"
    with pytest.raises(PluginError, match="exactly one"):
        pl.select({"reward": "milestone,speedup"})


class _TwoGuards:
    @hookimpl
    def kag_register_guards(self, register):
        register("alpha", object)
        register("beta", object)


def test_collection_kinds_switch_items_off_by_name():
    pl = Plugins(load_entrypoints=False)
    pl.register_plugin(_TwoGuards(), name="two-guards")
    assert {"alpha", "beta"} <= set(pl.selected_all("guard"))
    pl.select({"guard": "-alpha"})
    assert "alpha" not in pl.selected_all("guard") and "beta" in pl.selected_all("guard")
    with pytest.raises(PluginError, match="unknown guard 'gamma'"):
        pl.select({"guard": "-gamma"})


class _Duplicate:
    @hookimpl
    def kag_register_rewards(self, register):
        register("milestone", object)


def test_duplicate_names_are_an_error_naming_both_origins():
    pl = Plugins(load_entrypoints=False)
    with pytest.raises(PluginError, match="two plugins register the reward 'milestone'"):
        pl.register_plugin(_Duplicate(), name="dup", origin="dup 1.0")


def _selected_in_worker(selection, queue):
    pl = Plugins.from_names(selection, load_entrypoints=False)
    queue.put((pl.selected("reward"), pl.names_selected()))


def test_worker_rebuilds_the_manager_from_plain_names():
    pl = Plugins(load_entrypoints=False)
    pl.select({"reward": "speedup"})
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_selected_in_worker, args=(pl.names_selected(), queue))
    proc.start()
    name, names = queue.get(timeout=60)
    proc.join(timeout=60)
    assert name == "speedup" and names == {"reward": ["speedup"]}


def test_every_kind_has_a_registration_hook():
    pl = Plugins(load_entrypoints=False)
    for kind in KINDS:
        assert isinstance(pl.names(kind), list)
