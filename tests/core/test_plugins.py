import multiprocessing as mp
import types

import pytest

import kag.core.plugins as plugins_module
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


class _Misspelled:
    @hookimpl
    def kag_register_reward(self, register):  # the hook is kag_register_rewards
        register("typo", object)


def test_a_misspelled_hook_is_an_error_naming_the_plugin():
    pl = Plugins(load_entrypoints=False)
    with pytest.raises(PluginError) as info:
        pl.register_plugin(_Misspelled(), name="typo-plugin", origin="typo 1.0")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("the kag plugin 'typo-plugin' (typo 1.0) implements the unknown hook "
                              "'kag_register_reward': did you mean 'kag_register_rewards'?")
    assert not pl.pm.has_plugin("typo-plugin") and "typo" not in pl.names("reward")


class _EntryPoint:
    """What importlib.metadata gives for a third-party package's ``kag`` entry point."""

    name = "typo"
    dist = types.SimpleNamespace(name="kag-typo", version="0.1")

    def load(self):
        return _Misspelled()


def test_a_third_party_plugin_with_a_misspelled_hook_fails_with_a_user_error(monkeypatch):
    monkeypatch.setattr(plugins_module, "md", types.SimpleNamespace(entry_points=lambda group: [_EntryPoint()]))
    with pytest.raises(PluginError, match=r"^the kag plugin 'kag-typo:typo' \(kag-typo 0\.1\) implements the unknown "
                       r"hook 'kag_register_reward': did you mean 'kag_register_rewards'\? Fix the name or set "
                       r"KAG_DISABLE_PLUGINS=typo$"):
        Plugins()
    monkeypatch.setenv("KAG_DISABLE_PLUGINS", "typo")
    assert "milestone" in Plugins().names("reward")
