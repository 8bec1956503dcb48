"""The local sandbox: real subprocesses, time and memory limits, network isolation where possible."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from kag.core.plugins import Plugins
from kag.core.agent.sandbox import SandboxHandle
from kag.plugins.sandboxes.local import ENV_NAMES, ENV_PREFIXES, LocalSandbox, network_namespace_problem


def test_copies_the_workspace_and_cleans_up(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("hello")
    handle = Plugins(load_entrypoints=False).create("sandbox", "local").start(src)
    assert isinstance(handle, SandboxHandle)
    root = handle.path()
    assert root != src and (root / "a.txt").read_text() == "hello"
    result = handle.run("cat a.txt; echo changed > a.txt; echo oops >&2; exit 3")
    assert (result.returncode, result.stdout, result.stderr) == (3, "hello", "oops\n")
    assert (src / "a.txt").read_text() == "hello"  # the original is untouched
    handle.close()
    assert not root.exists()
    handle.close()  # idempotent


def test_in_place_and_empty_workspaces(tmp_path: Path):
    with LocalSandbox(copy=False).start(tmp_path) as handle:
        handle.run("touch made_here")
    assert (tmp_path / "made_here").exists()  # in place: nothing is deleted
    with LocalSandbox().start() as handle:
        assert handle.path().is_dir() and not any(handle.path().iterdir())
    with pytest.raises(FileNotFoundError, match="not a directory"):
        LocalSandbox().start(tmp_path / "missing")


def test_timeout_kills_the_process_group(tmp_path: Path):
    with LocalSandbox().start() as handle:
        start = time.monotonic()
        result = handle.run("echo started; (sleep 30; touch late) & sleep 30", timeout=1)
        assert time.monotonic() - start < 10
        assert result.timed_out and result.returncode != 0 and "started" in result.stdout
        time.sleep(0.2)
        assert not (handle.path() / "late").exists()


def test_memory_limit():
    script = "import sys; b = bytearray(400 * 1024 * 1024); print('allocated')"
    with LocalSandbox(memory_limit_mb=200).start() as handle:
        limited = handle.run(f"{sys.executable} -S -c \"{script}\"")
    assert limited.returncode != 0 and "MemoryError" in limited.stderr
    with LocalSandbox().start() as handle:
        free = handle.run(f"{sys.executable} -S -c \"{script}\"")
    assert free.returncode == 0 and "allocated" in free.stdout


def test_network_is_cut_off_where_the_os_allows_it():
    probe = (f"{sys.executable} -c \"import socket; s = socket.socket(); s.settimeout(3); "
             f"s.connect(('1.1.1.1', 53)); print('connected')\"")
    with LocalSandbox().start() as handle:
        problem = network_namespace_problem()
        if problem is not None:
            assert not handle.network_isolated and problem in handle.isolation_notes[0]
            pytest.skip(f"network namespaces unavailable here: {problem}")
        assert handle.network_isolated
        result = handle.run(probe, timeout=20)
        # no route (an empty network namespace), or refused before that by Landlock's TCP rules
        assert "connected" not in result.stdout and ("unreachable" in result.stderr.lower()
                                                     or "permission denied" in result.stderr.lower())
        assert "lo" in handle.run("cat /proc/self/net/dev").stdout
    with LocalSandbox(network=True).start() as handle:
        assert not handle.network_isolated and "switched off" in handle.isolation_notes[0]
    assert "network" in LocalSandbox.isolation_info()


def test_shell_and_spawn_share_the_workspace():
    with LocalSandbox().start() as handle:
        shell = handle.open_shell()
        assert shell.stdin is not None and shell.stdout is not None
        shell.stdin.write(b"pwd; echo $((6*7))\nexit\n")
        shell.stdin.flush()
        assert shell.stdout.read().decode().split() == [handle.workdir, "42"]
        job = handle.spawn("sleep 30")
        handle.close()  # kills what is still running
        assert job.wait(timeout=10) is not None


def test_agent_commands_get_only_the_allow_listed_environment(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-agents")
    monkeypatch.setenv("HF_TOKEN", "hf-test-not-for-agents")
    monkeypatch.setenv("HOME", str(tmp_path / "host-home"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    box = LocalSandbox(env={"TASK_SETTING": "on"}).start(bridge_dir=tmp_path / "bridge")
    with box:
        home = box.home
        ran = box.run("env").stdout
        shell = box.open_shell()
        shell.stdin.write(b"env; exit\n")
        shelled = shell.stdout.read().decode()
        spawned = box.spawn("env").stdout.read().decode()
        for seen in (ran, shelled, spawned):
            names = {line.split("=", 1)[0]: line.split("=", 1)[1] for line in seen.splitlines() if "=" in line}
            assert "OPENAI_API_KEY" not in names and "HF_TOKEN" not in names, seen
            assert names["HOME"] == str(home) != str(tmp_path / "host-home")
            assert names["CUDA_VISIBLE_DEVICES"] == "3" and names["LC_ALL"] == "C.UTF-8"
            assert names["TASK_SETTING"] == "on" and names["KAG_BRIDGE"] == str(tmp_path / "bridge" / "eval.sock")
            assert set(names) - {"PWD", "SHLVL", "_", "OLDPWD"} <= (
                set(ENV_NAMES) | {"HOME", "TMPDIR", "KAG_BRIDGE", "TASK_SETTING"}
                | {n for n in names if n.startswith(ENV_PREFIXES)}), sorted(names)
        assert home.is_dir() and box.run("touch ~/cache && echo ok").stdout == "ok\n"
    assert not home.exists()


@pytest.mark.skipif(__import__("kag.core.trust.confine", fromlist=["x"]).landlock_abi() == 0,
                    reason="commands are confined with Landlock, which this kernel lacks")
def test_agent_commands_write_only_the_workspace_and_never_reach_kags_caches(tmp_path):
    """As an agent's bash would try it: rewrite the baseline cache, read the evaluator's key, plant a
    file outside the workspace, read another process's memory; only the workspace and HOME are
    writable."""
    from kag.core.trust import integrity
    from kag.core.eval.orchestrator.build import cache_root

    cache = cache_root()
    integrity.load_key(cache)
    key = integrity.key_path(cache)
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside.txt"
    with LocalSandbox().start(ws) as box:
        attempts = {
            "workspace": "echo 1 > model_new.py && echo ok",
            "home": "echo 1 > ~/x && echo ok",
            "cache": f"echo '{{}}' > {cache}/baselines.json && echo ok",
            "key": f"cat {key} && echo ok",
            "outside": f"echo 1 > {outside} && echo ok",
            "tmp": "echo 1 > /tmp/kag-agent-probe && echo ok",
            "parent memory": f"head -c 1 /proc/{os.getpid()}/mem && echo ok",
            "parent environ": f"cat /proc/{os.getpid()}/environ && echo ok",
        }
        got = {what: box.run(cmd).stdout.strip().endswith("ok") for what, cmd in attempts.items()}
    assert got == {"workspace": True, "home": True, "cache": False, "key": False, "outside": False, "tmp": False,
                   "parent memory": False, "parent environ": False}, got
    assert not outside.exists()


def _listen(path: Path):
    import socket

    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(4)
    return server


def test_the_hosts_unix_sockets_are_out_of_sight_but_the_episodes_folders_are_not(tmp_path):
    """A Unix socket is reachable from any process that can resolve its path (Landlock does not
    govern connect() on it): a Ray node's object store in /tmp/ray, Docker's in /run. Commands get
    empty /tmp, /run and /dev/shm with only their workspace, HOME and bridge bound back in, and
    cannot unmount them to see the host's."""
    from kag.plugins.sandboxes.local import mount_namespace_problem

    if network_namespace_problem() or mount_namespace_problem():
        with LocalSandbox().start() as handle:
            assert any("Unix sockets" in note for note in handle.isolation_notes)
        pytest.skip(f"no mount namespace here: {network_namespace_problem() or mount_namespace_problem()}")
    host_tmp = tmp_path / "host.sock"  # tmp_path is under /tmp
    servers = [_listen(host_tmp)]
    run_sock = Path("/run") / f"kag-test-{os.getpid()}.sock"
    try:
        servers.append(_listen(run_sock))
    except OSError:
        run_sock = None
    ws, bridge = tmp_path / "ws", tmp_path / "bridge"
    ws.mkdir()
    bridge.mkdir()
    bridge_sock = bridge / "eval.sock"
    servers.append(_listen(bridge_sock))
    connect = (f"{sys.executable} -c \"import socket, sys; s = socket.socket(socket.AF_UNIX); "
               f"s.connect(sys.argv[1]); print('connected')\"")
    try:
        with LocalSandbox().start(ws, bridge_dir=bridge) as box:
            assert box.run(f"{connect} {host_tmp}").stdout.strip() == ""
            if run_sock is not None:
                assert box.run(f"{connect} {run_sock}").stdout.strip() == ""
            assert box.run(f"{connect} \"$KAG_BRIDGE\"").stdout.strip() == "connected"  # the episode's own
            assert box.run("echo 1 > model_new.py && cat model_new.py").stdout.strip() == "1"
            assert box.run(f"{sys.executable} -c 'import torch; print(1)'").stdout.strip() == "1"
            for attempt in ("umount /tmp", "umount -l /tmp", "mount -t tmpfs none /tmp"):
                box.run(attempt)
                assert box.run(f"{connect} {host_tmp}").stdout.strip() == "", attempt
            assert box.run("ls /tmp/ray /run/docker.sock 2>&1; echo done").stdout.strip().endswith("done")
            assert box.run("test -e /tmp/ray || test -e /run/docker.sock || echo hidden").stdout.strip() == "hidden"
    finally:
        for server in servers:
            server.close()
        if run_sock is not None:
            run_sock.unlink(missing_ok=True)


def test_a_ray_temp_folder_moved_out_of_tmp_is_emptied_too(monkeypatch):
    from kag.plugins.sandboxes.local import mount_namespace_problem

    if network_namespace_problem() or mount_namespace_problem():
        pytest.skip("no mount namespace here")
    import tempfile

    ray_tmp = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="kag-test-raytmp-"))
    server = _listen(ray_tmp / "plasma_store")
    connect = (f"{sys.executable} -c \"import socket; s = socket.socket(socket.AF_UNIX); "
               f"s.connect('{ray_tmp / 'plasma_store'}'); print('connected')\"")
    try:
        monkeypatch.setenv("RAY_TMPDIR", str(ray_tmp))
        with LocalSandbox().start() as box:
            assert box.run(connect).stdout.strip() == ""
    finally:
        server.close()
        (ray_tmp / "plasma_store").unlink()
        ray_tmp.rmdir()


@pytest.mark.skipif(__import__("kag.core.trust.confine", fromlist=["x"]).landlock_abi() == 0,
                    reason="commands are confined with Landlock, which this kernel lacks")
def test_the_precompiled_header_store_is_out_of_reach_even_under_a_read_path(monkeypatch):
    """The header store has a key of its own: an agent that read it could sign a forged header, which
    every later binding of the host would compile in. Placed under a folder agent commands may read
    (/opt here), the store is still unreadable and unwritable; so for the candidate and the compiler,
    whose confinements protect the same stores."""
    import shutil
    import tempfile

    from kag.core.eval.orchestrator import pch
    from kag.core.eval.orchestrator.build import confined
    from kag.core.trust import integrity
    from kag.core.trust.isolation import candidate_plan

    if not os.path.isdir("/opt") or not os.access("/opt", os.W_OK):
        pytest.skip("needs a writable /opt, a folder under the agent's read paths")
    store = Path(tempfile.mkdtemp(prefix="kag-pch-probe-", dir="/opt"))
    try:
        monkeypatch.setenv("KAG_PCH_DIR", str(store))
        assert pch.pch_root() == store
        integrity.load_key(store)
        key = integrity.key_path(store)
        (store / "forged.gch").write_bytes(b"header")
        ws = store.parent / f"{store.name}-ws"
        ws.mkdir()
        with LocalSandbox().start(ws) as box:
            attempts = {"key": f"cat {key} && echo ok", "header": f"cat {store}/forged.gch && echo ok",
                        "plant": f"echo x > {store}/planted.gch && echo ok",
                        "usr": "cat /etc/hostname >/dev/null; ls /usr/bin >/dev/null && echo ok"}
            got = {what: box.run(cmd).stdout.strip().endswith("ok") for what, cmd in attempts.items()}
        assert got == {"key": False, "header": False, "plant": False, "usr": True}, got
        assert not (store / "planted.gch").exists()
        plan = candidate_plan(False)
        assert not any(str(store).startswith(p.rstrip("/") + "/") for p in plan.read_paths), plan.read_paths
        command = confined(["true"], ws, Path(tempfile.gettempdir()) / "kag-cache-probe")
        assert command[command.index(str(store)) - 1] == "--protect"
    finally:
        shutil.rmtree(store, ignore_errors=True)
        shutil.rmtree(store.parent / f"{store.name}-ws", ignore_errors=True)
