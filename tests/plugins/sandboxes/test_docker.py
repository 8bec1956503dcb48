"""The docker sandbox against a real daemon (CI starts one with .ci/start-docker)."""

import pytest

from kag.core.agent.bridge import BridgeReply, EvalBridge
from kag.plugins.sandboxes.docker import DockerSandbox, docker_problem

pytestmark = pytest.mark.docker

problem = docker_problem()
if problem:
    pytestmark = [pytest.mark.docker, pytest.mark.skip(reason=f"docker sandbox unavailable: {problem}")]


@pytest.fixture
def workspace(tmp_path):
    ws = tmp_path / "ws"
    (ws / "utils").mkdir(parents=True)
    (ws / "model.py").write_text("REFERENCE = 1\n")
    (ws / "utils" / "verification.py").write_text("print('trusted')\n")
    (ws / "model_new.py").write_text("x = 1\n")
    return ws


def test_commands_run_in_the_container_without_network(workspace):
    with DockerSandbox().start(workspace) as box:
        res = box.run("pwd; id -un; cat model_new.py")
        assert res.returncode == 0, res.output
        assert res.stdout.split() == ["/workspace", "agent", "x", "=", "1"]
        net = box.run("cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
        assert net.stdout.split() == ["lo"], f"interfaces: {net.stdout!r}"
        tcp = box.run("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\"")
        assert tcp.returncode != 0 and "Network is unreachable" in tcp.stderr


def test_workspace_is_shared_and_protected_files_are_read_only(workspace):
    with DockerSandbox().start(workspace) as box:
        assert box.run("echo 'y = 2' >> model_new.py").returncode == 0
        assert box.path("model_new.py").read_text() == "x = 1\ny = 2\n"
        for target in ("model.py", "utils/verification.py", "utils/new.py"):
            res = box.run(f"echo hack > {target}")
            assert res.returncode != 0 and "Read-only file system" in res.stderr, target
        assert box.path("model.py").read_text() == "REFERENCE = 1\n"
        assert box.run("touch /etc/x").returncode != 0  # read-only root file system


def test_timeouts_kill_the_command_inside_the_container(workspace):
    with DockerSandbox().start(workspace) as box:
        res = box.run("sleep 30", timeout=1)
        assert res.timed_out and res.elapsed_s < 15
        assert "sleep 30" not in box.run("ps -eo args").stdout


def test_shell_and_background_processes(workspace):
    with DockerSandbox().start(workspace) as box:
        shell = box.open_shell()
        shell.stdin.write(b"cd /tmp && pwd\n")
        assert shell.stdout.readline().strip() == b"/tmp"
        job = box.spawn("echo started; sleep 0.2; echo done")
        assert job.stdout.read().split() == [b"started", b"done"]


def test_skill_scripts_reach_the_evaluator_through_the_mounted_bridge(workspace, tmp_path):
    asked = []

    def handler(action, args):
        asked.append(action)
        return BridgeReply("verified: correct", 0)

    with EvalBridge(handler, tmp_path / "bridge") as bridge:
        with DockerSandbox().start(workspace, bridge_dir=bridge.directory) as box:
            box.path("ask.py").write_text(
                "import json, os, socket\n"
                "s = socket.socket(socket.AF_UNIX)\n"
                "s.connect(os.environ['KAG_BRIDGE'])\n"
                "s.sendall(json.dumps({'action': 'verify'}).encode() + b'\\n')\n"
                "print(json.loads(s.makefile().readline())['output'])\n")
            res = box.run("python3 ask.py")
            assert res.returncode == 0, res.output
            assert res.stdout.strip() == "verified: correct"
    assert asked == ["verify"]


def test_plugin_is_registered_and_reports_availability():
    from kag.core.plugins import Plugins

    entry = Plugins(load_entrypoints=False).entry("sandbox", "docker")
    assert entry.availability() is None


def test_no_host_environment_reaches_the_container(workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-agents")
    monkeypatch.setenv("HOME", str(tmp_path / "host-home"))
    with EvalBridge(lambda action, args: BridgeReply("", 0), tmp_path / "bridge") as bridge:
        with DockerSandbox(env={"TASK_SETTING": "on"}).start(workspace, bridge_dir=bridge.directory) as box:
            ran = box.run("env").stdout
            spawned = box.spawn("env").stdout.read().decode()
            shell = box.open_shell()
            shell.stdin.write(b"env; exit\n")
            shelled = shell.stdout.read().decode()
    for seen in (ran, spawned, shelled):
        names = dict(line.split("=", 1) for line in seen.splitlines() if "=" in line)
        assert "OPENAI_API_KEY" not in names and "sk-test" not in seen, seen
        assert names["HOME"] == "/home/agent" and str(tmp_path) not in seen
        assert names["TASK_SETTING"] == "on" and names["KAG_BRIDGE"] == "/kag-bridge/eval.sock"
        assert set(names) <= {"PATH", "HOSTNAME", "HOME", "PYTHONDONTWRITEBYTECODE", "KAG_BRIDGE", "TASK_SETTING",
                              "PWD", "SHLVL", "_", "OLDPWD", "TERM"}, sorted(names)


def test_a_protected_path_that_is_a_link_is_not_mounted(workspace, tmp_path):
    """Docker mounts a link's target: a linked utils/ would put a host folder in the container."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text("host secret")
    (workspace / "utils" / "verification.py").unlink()
    (workspace / "utils").rmdir()
    (workspace / "utils").symlink_to(host)
    with pytest.raises(RuntimeError, match="utils is a symbolic link: links are not allowed"):
        DockerSandbox().start(workspace)
