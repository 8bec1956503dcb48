"""Logger plugins: a stage's metrics reach TensorBoard, wandb (offline) and a third party's sink,
registered the way any plugin is; a missing tracker is one line naming what to install."""

import importlib.util
import json

import pytest

from kag.core.hookspecs import hookimpl
from kag.core.plugins import Plugins
from kag.plugins.algorithms.ppo.config import train_config_from_dict

COMMON = {"model": "tiny", "environment": "copy-digit", "actor_lr": 1e-3, "critic_lr": 1e-3,
          "episodes_per_step": 4, "mini_batch_size": 4, "micro_batch_size": 2, "max_new_tokens": 2,
          "steps": 2, "tensorboard": False}


class Recorder:
    """A third party's sink: keeps what it is given."""

    seen: list = []

    def __init__(self, out_dir, stage, config=None, prefix=""):
        self.stage, self.prefix = stage, prefix
        Recorder.seen.append(("init", stage, config["seed"], prefix))

    def log(self, step, metrics):
        Recorder.seen.append(("log", step, metrics["reward_mean"]))

    def close(self):
        Recorder.seen.append(("close",))


class RecorderPlugin:
    @hookimpl
    def kag_register_loggers(self, register):
        register("recorder", Recorder)


def run(plugins, tmp_path, **over):
    data = {"train": {**COMMON, "output_dir": str(tmp_path / "w"), **over.pop("train", {})}, **over}
    cfg = train_config_from_dict("warmup", data)
    plugins.create("algorithm", "warmup", config=cfg, plugins=plugins).run()
    return [json.loads(line) for line in (tmp_path / "w" / "metrics.jsonl").read_text().splitlines()]


def test_a_third_party_sink_gets_every_step_with_its_options(tmp_path):
    plugins = Plugins(load_entrypoints=False)
    plugins.register_plugin(RecorderPlugin(), "recorder-plugin")
    Recorder.seen = []
    rows = run(plugins, tmp_path, train={"loggers": ["recorder"], "seed": 5}, loggers={"recorder": {"prefix": "p/"}})
    assert Recorder.seen == [("init", "warmup", 5, "p/"), ("log", 1, rows[0]["reward_mean"]),
                             ("log", 2, rows[1]["reward_mean"]), ("close",)]


def test_an_unknown_or_unavailable_logger_stops_the_stage_with_one_line(tmp_path):
    plugins = Plugins(load_entrypoints=False)
    with pytest.raises(Exception, match="nope"):
        run(plugins, tmp_path, train={"loggers": ["nope"]})

    class Unavailable(Recorder):
        @staticmethod
        def check_available():
            return "the unavailable logger needs trackerlib, which is not installed: pip install trackerlib"

    class Plugin:
        @hookimpl
        def kag_register_loggers(self, register):
            register("unavailable", Unavailable)

    plugins.register_plugin(Plugin(), "unavailable-plugin")
    with pytest.raises(ValueError, match="loggers: the unavailable logger needs trackerlib.*pip install trackerlib"):
        run(plugins, tmp_path, train={"loggers": ["unavailable"]})
    assert not (tmp_path / "w" / "checkpoint").exists()  # refused before any model was loaded


def test_sinks_are_closed_when_a_stage_fails_and_get_only_finite_numbers(tmp_path):
    class Failing(Recorder):
        def log(self, step, metrics):
            assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in metrics.values())
            Recorder.seen.append(("log", step, metrics["reward_mean"]))
            if step == 2:
                raise OSError("tracker unreachable")

    class Plugin:
        @hookimpl
        def kag_register_loggers(self, register):
            register("failing", Failing)

    plugins = Plugins(load_entrypoints=False)
    plugins.register_plugin(Plugin(), "failing-plugin")
    Recorder.seen = []
    with pytest.raises(OSError, match="tracker unreachable"):
        run(plugins, tmp_path, train={"loggers": ["failing"], "steps": 3})
    assert [e[0] for e in Recorder.seen] == ["init", "log", "log", "close"]


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None, reason="tensorboard is not installed")
def test_tensorboard_scalars_read_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    rows = run(Plugins(load_entrypoints=False), tmp_path, train={"tensorboard": True})
    acc = EventAccumulator(str(tmp_path / "w" / "tensorboard"))
    acc.Reload()
    got = [e.value for e in acc.Scalars("warmup/reward_mean")]
    assert got == pytest.approx([r["reward_mean"] for r in rows])


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb is not installed")
def test_wandb_offline_run_holds_the_last_step(tmp_path, monkeypatch):
    from kag.plugins.loggers.trackers import WandbSink

    monkeypatch.setenv("WANDB_SILENT", "true")
    sink = WandbSink(tmp_path, "warmup", config={"seed": 3}, mode="offline")
    sink.log(1, {"reward_mean": 0.25, "not_a_number": float("nan"), "a_flag": True})
    sink.log(2, {"reward_mean": 0.625})
    assert sink.run.config["seed"] == 3
    sink.close()
    (record,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")  # what `wandb sync` would upload
    data = record.read_bytes()
    assert b"reward_mean" in data and b"0.25" in data and b"0.625" in data
    assert b"not_a_number" not in data and b"a_flag" not in data  # only finite numbers are sent
