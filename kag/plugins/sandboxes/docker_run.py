"""One build or evaluation container of the docker sandbox: the host side (trusted).

What is mounted (the host's toolchain and Python, read-only at the same paths, behind a skeleton
of empty parent folders), the container's limits, and the channel its verdict comes back on (the
attach stream: the container's stdin carries the request and a fresh token, its stdout the one
``KAG-RESULT <token> <json>`` line; see ``docker_inside`` for why only the trusted runner can
write that line). ``docker_eval`` decides what runs in which container; the design is there.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import attrs

from kag.plugin import BUILTIN, Plugins
from kag.plugins.sandboxes.docker_inside import RESULT_TAG

INSIDE_MODULE = "kag.plugins.sandboxes.docker_inside"
MAX_STDOUT = 256 * 1024 * 1024
STDERR_TAIL = 16 * 1024
START_MARGIN_S = 120.0  # container start, interpreter and torch import, on top of the work's limits


@attrs.define
class EvalContainerConfig:
    """How evaluation containers are made (``DockerSandbox``'s ``eval_*`` options)."""

    image: str
    user: str = "agent"
    memory: str = "16g"
    cpus: float | None = None  # None: no CPU quota (a quota would distort CPU timings)
    pids: int = 4096
    shm_size: str = "2g"
    tmp_size: str = "8g"
    toolchain: tuple[str, ...] = ("/usr",)
    extra_mounts: tuple[str, ...] = ()
    gpu_runtime: str | None = None  # e.g. "nvidia" when the daemon needs it named for GPUs


# top-level folders of the image that stay as they are (system folders, the merged-/usr links)
SYSTEM_TOPS = ("usr", "etc", "tmp", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "dev", "proc", "sys")


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def host_mounts(config: EvalContainerConfig) -> list[str]:
    """Host paths mounted read-only at the same place in every build and evaluation container."""
    from kag.plugin import PACKAGE_DIR

    wanted = list(config.toolchain) + ["/etc/ld.so.cache", "/etc/alternatives", sys.prefix, sys.base_prefix,
                                       PACKAGE_DIR]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            wanted.append(os.environ[var])
    wanted += list(config.extra_mounts)
    out: list[str] = []
    # the paths as this interpreter uses them (not resolved): a venv is found by the path its
    # python is started from, and the daemon resolves each mount's source itself
    for raw in sorted({os.path.abspath(p) for p in wanted}, key=len):
        if os.path.exists(raw) and raw != "/" and not _under(raw, out):
            out.append(raw)
    return out


def skeleton(root: Path, targets: list[str]) -> dict[str, str]:
    """Empty, traversable stand-ins for the top-level folders holding mount targets (other than
    the image's system folders), so /root/.pyenv/... can be reached without showing the host's
    /root (nor the image's, which its user could not enter).
    Returns {host folder: container folder}; the mount points inside are made here too."""
    out: dict[str, str] = {}
    for target in targets:
        parts = Path(target).parts
        if len(parts) < 3 or parts[1] in SYSTEM_TOPS:
            continue
        top = root / parts[1]
        (root.joinpath(*parts[1:])).mkdir(parents=True, exist_ok=True)
        out[str(top)] = f"/{parts[1]}"
    for folder in [root, *root.rglob("*")]:
        if folder.is_dir():
            os.chmod(folder, 0o755)
    return out


def python_executable() -> str:
    """The interpreter the containers run: this one, at the same path (mounted with its prefix;
    not resolved, or a venv's python would start without the venv)."""
    return os.path.abspath(sys.executable)


def container_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The containers' whole environment: a few host variables the toolchain reads, nothing else
    of the host's; every cache and home points into the container's own /tmp."""
    from kag.plugin import PACKAGE_DIR

    python_bin = os.path.dirname(python_executable())
    kag_root = os.path.dirname(PACKAGE_DIR)
    env = {"PATH": f"{python_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "PYTHONPATH": kag_root, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
           "HOME": "/tmp/home", "USER": "agent", "TMPDIR": "/tmp",
           "XDG_CACHE_HOME": "/tmp/.cache", "KAG_CACHE_DIR": "/tmp/kag-cache", "KAG_WARM_JUDGES": "0",
           "TORCHINDUCTOR_CACHE_DIR": "/tmp/torchinductor", "TRITON_CACHE_DIR": "/tmp/triton",
           # torch's precompiled header (kag.core.eval.orchestrator.pch) would be compiled again in every build container
           "KAG_PCH_DIR": "off"}
    for var in ("CXX", "CC", "CUDA_HOME", "CUDA_PATH", "TORCH_CUDA_ARCH_LIST", "OMP_NUM_THREADS"):
        if os.environ.get(var):
            env[var] = os.environ[var]
    env.update(extra or {})
    return env


@attrs.define
class ContainerOutcome:
    """One container's end: the runner's payload (None when no genuine result line came) and why."""

    payload: dict[str, Any] | None
    exit_code: int | None
    timed_out: bool
    stderr_tail: str
    problem: str | None = None

    def describe(self) -> str:
        """Why there is no result, for an error text (the container's stderr comes from inside it)."""
        if self.problem:
            return self.problem
        why = "did not finish in time and was killed" if self.timed_out else \
            f"ended (exit status {self.exit_code}) without a result"
        tail = self.stderr_tail.strip()[-2000:]
        return f"the evaluation container {why}" + (f"; its last output:\n{tail}" if tail else "")


def _read_frames(sock: Any, out: dict[int, bytearray]) -> None:
    from docker.utils.socket import frames_iter

    try:
        for stream, data in frames_iter(sock, tty=False):
            buf = out.setdefault(stream, bytearray())
            buf += data
            if stream == 2 and len(buf) > 4 * STDERR_TAIL:
                del buf[:-STDERR_TAIL]
            elif len(buf) > MAX_STDOUT:
                del buf[MAX_STDOUT:]
    except Exception:  # noqa: BLE001 - the socket closes when the container is removed
        pass


def run_container(config: EvalContainerConfig, request: dict[str, Any], mounts: list[Any], timeout_s: float,
                  device_requests: list[Any] | None = None) -> ContainerOutcome:
    """Start one container of ``INSIDE_MODULE``, hand it ``request``, wait, remove it.

    Its working folder is the read-only "/": ``python -m`` puts the working folder first on
    sys.path, and a writable one (/tmp) would let the candidate plant a module that the trusted
    runner or the judge imports later."""
    import docker
    import requests

    token = secrets.token_hex(16)
    client = docker.from_env(timeout=120)
    api = client.api
    host_config = api.create_host_config(
        mounts=mounts, tmpfs={"/tmp": f"rw,exec,nosuid,size={config.tmp_size}"}, network_mode="none",
        read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"], pids_limit=config.pids,
        mem_limit=config.memory, memswap_limit=config.memory, shm_size=config.shm_size,
        nano_cpus=int(config.cpus * 1e9) if config.cpus else None, device_requests=device_requests or None,
        runtime=config.gpu_runtime if device_requests else None,
        log_config=docker.types.LogConfig(type="none"))  # nothing it prints lands on the host's disk
    ctr = None
    out: dict[int, bytearray] = {}
    timed_out = False
    exit_code = None
    sock = None
    try:
        ctr = api.create_container(config.image, command=[python_executable(), "-m", INSIDE_MODULE],
                                   user=config.user, stdin_open=True, environment=container_env(),
                                   working_dir="/", host_config=host_config, labels={"kag": "evaluation"},
                                   name=f"kag-eval-{uuid.uuid4().hex[:12]}")["Id"]
        sock = api.attach_socket(ctr, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        raw = getattr(sock, "_sock", sock)
        raw.settimeout(None)
        reader = threading.Thread(target=_read_frames, args=(sock, out), name="kag-eval-container", daemon=True)
        reader.start()
        api.start(ctr)
        try:
            raw.sendall(json.dumps(dict(request, token=token)).encode() + b"\n")
        except OSError:
            pass  # it ended before reading: its exit status and stderr say why
        try:
            exit_code = int(api.wait(ctr, timeout=timeout_s).get("StatusCode", -1))
        except (requests.exceptions.RequestException, OSError):
            timed_out = True
            try:
                api.kill(ctr)
            except docker.errors.DockerException:
                pass
        reader.join(timeout=30)
    except docker.errors.DockerException as exc:
        return ContainerOutcome(None, exit_code, timed_out, "", f"the evaluation container could not run: {exc}")
    finally:
        if ctr is not None:
            try:
                api.remove_container(ctr, force=True)
            except docker.errors.DockerException:
                pass
        if sock is not None:
            sock.close()
        client.close()
    stderr = bytes(out.get(2, b""))[-STDERR_TAIL:].decode(errors="replace")
    return ContainerOutcome(result_payload(bytes(out.get(1, b"")), token), exit_code, timed_out, stderr)


def result_payload(stdout: bytes, token: str) -> dict[str, Any] | None:
    """The runner's payload: the last stdout line tagged with this container's token; lines with
    another token or none (what anything else might have managed to write) do not count."""
    prefix = f"{RESULT_TAG} {token} ".encode()
    payload = None
    for line in stdout.splitlines():
        if line.startswith(prefix):
            try:
                payload = json.loads(line[len(prefix):])
            except ValueError:
                payload = None
    return payload if isinstance(payload, dict) else None


def plugin_spec(plugins: Plugins) -> dict[str, Any]:
    """Names that rebuild ``plugins`` inside a container (plugin objects never cross processes)."""
    builtins = [name for name, origin in plugins.origins.items() if origin == BUILTIN]
    return {"builtins": builtins, "entrypoints": any(o != BUILTIN for o in plugins.origins.values()),
            "selection": plugins.names_selected()}


def bind(source: str | Path, target: str, read_only: bool = True) -> Any:
    import docker

    return docker.types.Mount(target, str(source), type="bind", read_only=read_only)
