"""In a docker episode no solution code runs on the host: attacks on the evaluation containers.

Each solution here tries what a hostile agent would: read files the test planted on the host,
write markers on the host, find out where it runs, and forge the verdict on every descriptor it
can reach. The evaluator's answer must show it ran in another mount and PID namespace, read and
wrote nothing of the host's, and got the verdict its outputs deserve. CPU backend (CI has no GPU).
"""

import json
import os
import socket
import uuid
from pathlib import Path

import pytest

from kag.core.agent.loop import Agent, AgentConfig
from kag.core.eval.orchestrator.evaluate import EvalOptions
from kag.core.plugins import Plugins
from kag.core.records import Solution, Task, to_json
from kag.core.agent.trajectory import TrajectoryWriter
from kag.plugins.sandboxes.docker import DockerSandbox, docker_problem

pytestmark = pytest.mark.docker
problem = docker_problem()
if problem:
    pytestmark = [pytest.mark.docker, pytest.mark.skip(reason=f"docker sandbox unavailable: {problem}")]

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
ATTACK_TAG = "KAG-ATTACK "
# guards off: every verdict must hold without them, and the static ones would stop this
# pure-PyTorch solution before any of its code runs
NO_GUARDS = EvalOptions(backend="cpu", num_timed=3, warmup=1, guards=())


def relu_task() -> Task:
    path = EXAMPLES / "relu" / "cpu" / "model.py"
    return Task(name="relu/cpu", source="file", code=path.read_text(), path=str(path))


@pytest.fixture(scope="module")
def sandbox():
    """One sandbox for the module: its seed build (binding.cpp, ~30 s on 2 cores) happens once."""
    return DockerSandbox()


@pytest.fixture
def host(tmp_path):
    """Secrets planted on the host (under /tmp and the home folder) and marker paths that must
    stay absent; removed afterwards."""
    tag = uuid.uuid4().hex[:10]
    secret = f"kag-host-secret-{tag}"
    files = [Path("/tmp") / f"kag-secret-{tag}.txt", Path.home() / f".kag-secret-{tag}", tmp_path / "secret.txt"]
    for path in files:
        path.write_text(secret + "\n")
    import kag

    markers = [Path("/tmp") / f"kag-marker-{tag}", Path.home() / f"kag-marker-{tag}",
               Path(kag.__file__).parent / f"kag-marker-{tag}", tmp_path / "marker"]
    yield {"secret": secret, "files": [str(p) for p in files], "markers": [str(p) for p in markers], "tag": tag}
    for path in files + markers + [Path("/tmp") / f"kag-ran-{tag}"]:
        Path(path).unlink(missing_ok=True)


def attack_model_new(host: dict, correct: bool = True, forge: bool = False) -> str:
    """A ModelNew whose import reads the host's secrets, writes markers, notes where it runs (and
    with ``forge`` writes a passing verdict on every stdout/stderr it can open, on every descriptor
    of the container's first process, and sends that process SIGKILL)."""
    forged = json.dumps({"ok": True, "value": {"task": "relu/cpu", "backend": "cpu", "compiled": True,
                                                "correct": True, "times_ms": {"candidate": 0.001}}})
    return f'''
import json, os, signal, socket
import torch
import torch.nn as nn

report = {{"hostname": socket.gethostname(), "mnt": os.readlink("/proc/self/ns/mnt"),
          "pid": os.readlink("/proc/self/ns/pid"), "read": {{}}, "wrote": {{}}, "forged": []}}
for path in {host["files"]!r}:
    try:
        report["read"][path] = open(path).read()
    except OSError as exc:
        report["read"][path] = type(exc).__name__
for path in {host["markers"]!r}:
    try:
        with open(path, "w") as f:
            f.write("ran")
        report["wrote"][path] = "wrote"
    except OSError as exc:
        report["wrote"][path] = type(exc).__name__
try:  # the container's /tmp (Landlock keeps the candidate to its own folder): never the host's
    with open("/tmp/kag-ran-{host["tag"]}", "w") as f:
        f.write("ran")
except OSError as exc:
    report["wrote"]["/tmp/kag-ran"] = type(exc).__name__
if {forge!r}:
    line = "KAG-RESULT " + "0" * 32 + " " + {forged!r} + "\\n"
    try:  # the candidate's Landlock rules may hide /proc altogether
        pids = os.listdir("/proc")
    except OSError:
        pids = ["1"]
    for pid in pids:
        if not pid.isdigit():
            continue
        try:  # every descriptor of PID 1 (which holds the verdict's channel), stdout and stderr of the rest
            fds = os.listdir(f"/proc/{{pid}}/fd") if pid == "1" else ["1", "2"]
        except OSError:
            continue
        for fd in fds:
            try:
                with open(f"/proc/{{pid}}/fd/{{fd}}", "w") as f:
                    f.write(line)
                report["forged"].append(f"{{pid}}/{{fd}}")
            except OSError:
                pass
    try:
        os.kill(1, signal.SIGKILL)
    except OSError:
        pass
print("{ATTACK_TAG}" + json.dumps(report), flush=True)


class ModelNew(nn.Module):
    def forward(self, x):
        return {"torch.relu(x)" if correct else "torch.zeros_like(x) - 1.0"}
'''


def attack_report(result) -> dict:
    """What the solution found, from its captured output (it reached the verdict)."""
    out = result.metadata.get("candidate_output") or ""
    lines = [line for line in out.splitlines() if line.startswith(ATTACK_TAG)]
    assert lines, f"the solution's report is missing; the solution never ran? {result.error} {out[-2000:]}"
    return json.loads(lines[-1][len(ATTACK_TAG):])


def assert_isolated(report: dict, host: dict, *texts: str) -> None:
    """It ran in other namespaces, read no host file, wrote no host marker, leaked nothing."""
    assert report["mnt"] != os.readlink("/proc/self/ns/mnt") and report["pid"] != os.readlink("/proc/self/ns/pid")
    assert report["hostname"] != socket.gethostname()
    assert all(value in ("FileNotFoundError", "PermissionError") for value in report["read"].values()), report
    # kag's folder is mounted from the host: read-only there (a write to its own /tmp may succeed)
    assert report["wrote"][host["markers"][2]] == "OSError", report["wrote"]
    for marker in host["markers"] + [f"/tmp/kag-ran-{host['tag']}"]:
        assert not Path(marker).exists(), f"{marker} appeared on the host"
    for text in texts:
        assert host["secret"] not in text


def test_a_solution_evaluated_in_a_container_cannot_reach_the_host(sandbox, host):
    evaluator = sandbox.evaluator()
    result = evaluator.evaluate(relu_task(), Solution(model_new=attack_model_new(host)), NO_GUARDS,
                                Plugins(load_entrypoints=False))
    assert result.ok and result.reward.value >= 1, result  # an honest pure-PyTorch ReLU, guards off
    assert_isolated(attack_report(result), host, to_json(result))


def test_the_candidate_cannot_forge_the_containers_verdict(sandbox, host):
    """Wrong outputs, plus a forged passing verdict written wherever it can and a SIGKILL for the
    container's first process: the verdict is still the mismatch."""
    evaluator = sandbox.evaluator()
    result = evaluator.evaluate(relu_task(), Solution(model_new=attack_model_new(host, correct=False, forge=True)),
                                NO_GUARDS, Plugins(load_entrypoints=False))
    report = attack_report(result)
    assert not result.correct and result.error_kind == "mismatch" and result.reward.value == -1, result
    assert not any(entry.startswith("1/") for entry in report["forged"]), report["forged"]  # PID 1 unreachable
    assert_isolated(report, host, to_json(result))


def leaky_kernel(host: dict) -> str:
    """A kernel that includes the host's secret files: on the host, the compiler would quote them."""
    return "".join(f'#include "{path}"\n' for path in host["files"]) + "int leak() { return 0; }\n"


def test_a_build_cannot_include_host_files(sandbox, host):
    evaluator = sandbox.evaluator()
    built = evaluator.build(Solution(model_new="import cuda_extension\n", kernels={"leak.cpp": leaky_kernel(host)}),
                            NO_GUARDS, Plugins(load_entrypoints=False))
    assert not built.ok and "No such file or directory" in built.log, built.log
    assert host["files"][0] in built.log and host["secret"] not in built.log


def test_a_docker_episode_runs_no_solution_code_on_the_host(sandbox, host, tmp_path):
    """The agent compiles a kernel including host files, verifies a solution that probes the
    host, and stops: the bridge's answers and the final re-score all come from containers."""
    plugins = Plugins(load_entrypoints=False)
    calls = [{"tool": "read", "args": {"path": "model_new.py"}},
             {"tool": "write", "args": {"path": "kernels/leak.cpp", "content": leaky_kernel(host)}},
             {"tool": "bash", "args": {"command": "bash utils/compile.sh"}},
             {"tool": "bash", "args": {"command": "rm kernels/leak.cpp"}},
             {"tool": "write", "args": {"path": "model_new.py", "content": attack_model_new(host)}},
             {"tool": "bash", "args": {"command": "python3 utils/verification.py"}},
             {"content": "done"}]
    policy = plugins.create("policy", "replay", calls=calls)
    config = AgentConfig(eval_options=NO_GUARDS)
    traj, _ = Agent(plugins, policy, sandbox, config, writer=TrajectoryWriter(tmp_path),
                    policy_name="replay").run_episode(relu_task())
    observations = [o.content for t in traj.turns for o in t.observations]
    compiled, verified_text = observations[2], observations[5]
    assert "No such file or directory" in compiled and host["files"][0] in compiled, compiled
    assert "PASS" in verified_text, "\n---\n".join(observations)
    verified = [r for t in traj.turns for r in t.eval_results]
    assert len(verified) == 1
    assert traj.result is not None and traj.result.ok and traj.reward >= 1, traj.result  # the final re-score
    for result in (verified[0], traj.result):
        assert_isolated(attack_report(result), host, to_json(traj), *observations)


@pytest.mark.slow
def test_an_honest_docker_episode_is_rewarded(sandbox, tmp_path):
    """The relu example's replayed episode (compile, verify, profile) with every guard on."""
    plugins = Plugins(load_entrypoints=False)
    policy = plugins.create("policy", "replay", path=str(EXAMPLES / "relu" / "cpu" / "replay.json"))
    config = AgentConfig(eval_options=EvalOptions(backend="cpu", num_timed=5, warmup=1))
    traj, solution = Agent(plugins, policy, sandbox, config, writer=TrajectoryWriter(tmp_path),
                           policy_name="replay").run_episode(relu_task())
    assert traj.result is not None and traj.result.ok and traj.reward >= 1, traj.result
    outputs = [o.content for t in traj.turns for o in t.observations]
    assert any("build ok" in o for o in outputs) and any("PASS" in o for o in outputs)
    assert traj.result.durations_s.get("container_total")  # the final re-score ran in a container


def test_only_the_line_with_the_containers_token_is_the_verdict():
    from kag.plugins.sandboxes.docker_run import result_payload

    token = "a" * 32
    genuine = json.dumps({"ok": True, "value": {"correct": False}})
    forged = json.dumps({"ok": True, "value": {"correct": True}})
    stdout = "\n".join([f"KAG-RESULT {'b' * 32} {forged}", f"KAG-RESULT {token} {genuine}", f"KAG-RESULT {forged}",
                        f"noise KAG-RESULT {token} {forged}"]).encode()
    assert result_payload(stdout, token) == {"ok": True, "value": {"correct": False}}
    assert result_payload(f"KAG-RESULT {token} not json".encode(), token) is None
    assert result_payload(stdout, "c" * 32) is None


def test_containers_see_the_toolchain_but_not_the_hosts_private_folders(tmp_path):
    import sys

    from kag.plugins.sandboxes.docker_run import EvalContainerConfig, host_mounts, skeleton

    mounts = host_mounts(EvalContainerConfig(image="x"))
    assert "/usr" in mounts and os.path.realpath(sys.prefix) in mounts
    for private in ("/", "/root", "/home", "/tmp", "/work", "/etc", str(Path.home()), str(tmp_path)):
        assert private not in mounts
    assert not any(m == str(tmp_path) or str(tmp_path).startswith(m + "/") for m in mounts)
    folders = skeleton(tmp_path / "skel", mounts)
    for host_dir, target in folders.items():
        assert target not in ("/usr", "/etc", "/tmp")
        files = [p for p in Path(host_dir).rglob("*") if not p.is_dir()]
        assert not files and oct(Path(host_dir).stat().st_mode)[-3:] == "755"


@pytest.mark.slow  # 32 s: CI keeps the container's trust tests; this is the RL environment through it
def test_the_rl_environment_rescores_a_docker_episode_in_a_container(sandbox, host, tmp_path):
    """kernel-agentic with the docker sandbox: the final re-score of the episode's solution (after
    the agent's container is gone) comes from an evaluation container too."""
    import shutil

    import attrs

    plugins = Plugins(load_entrypoints=False)
    (tmp_path / "tasks").mkdir()
    shutil.copy(EXAMPLES / "relu" / "cpu" / "model.py", tmp_path / "tasks" / "relu.py")
    env = plugins.create("environment", "kernel-agentic", dataset=f"local:{tmp_path / 'tasks'}", plugins=plugins,
                         sandbox="docker", max_turns=5, backend="cpu", num_timed=3, warmup=1)
    env.sandbox = sandbox  # the module's sandbox: its seed build is done
    env.options = attrs.evolve(env.options, guards=())
    env.reset("relu")

    def call(name: str, **arguments) -> str:
        return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"

    wrote = env.step(call("read", path="model_new.py") + call("write", path="model_new.py",
                                                              content=attack_model_new(host)))
    assert wrote.info["tool_errors"] == 0, wrote.observation
    final = env.step("done")
    assert final.done and final.reward >= 1 and final.info["right"], env.last_result
    assert_isolated(attack_report(env.last_result), host, to_json(env.last_result))
