"""`kag eval`'s executor options as a user meets them (no episode runs)."""

from pathlib import Path

from tests.conftest import run_kag

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_ray_address_without_the_ray_executor_is_a_one_line_usage_error(tmp_path):
    proc = run_kag("eval", "--dataset", f"local:{EXAMPLES / 'relu' / 'cpu' / 'model.py'}", "--backend", "cpu",
                   "--policy", "replay", "--policy-option", f"path={EXAMPLES / 'relu' / 'cpu' / 'replay.json'}",
                   "--ray-address", "127.0.0.1:6379", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == ("kag: error: --ray-address is for the ray executor; add "
                                                    "--plugin executor=ray (selected: local)")


def test_an_unknown_executor_lists_the_known_ones(tmp_path):
    proc = run_kag("eval", "--dataset", f"local:{EXAMPLES / 'relu' / 'cpu' / 'model.py'}", "--backend", "cpu",
                   "--plugin", "executor=dask", "--out", str(tmp_path / "out"),
                   env={"KAG_LOAD_PLUGINS": ""})  # the built-ins only: an installed plugin's executor is listed too
    assert proc.returncode == 2 and "unknown executor 'dask'; the executor plugins are: local, ray" in proc.stderr
