"""The ``docker`` sandbox: each episode in its own container, with no network.

The container gets the workspace as a bind mount (protected files mounted read-only over it), CPU,
memory and process limits, a read-only root file system, no capabilities and ``--network none``.
The trusted evaluator stays outside: the skill scripts reach it through the evaluation bridge's
socket, mounted at /kag-bridge. Images are built from local files only (``kag docker-image``
imports a Debian root file system made by debootstrap); nothing is pulled.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import click

from kag.core import safefs
from kag.core.hookspecs import hookimpl
from kag.core.sandbox import CommandResult
from kag.core.toolkit import PROTECTED_PATHS

DEFAULT_IMAGE = "kag-sandbox:latest"
WORKDIR = "/workspace"
BRIDGE_DIR = "/kag-bridge"
DOCKERFILE = """\
FROM {base}
RUN useradd --create-home --uid 1000 agent && mkdir -p /workspace && chown agent /workspace
ENV PYTHONDONTWRITEBYTECODE=1
WORKDIR /workspace
"""


def _docker(*args: str, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, **kw)


@functools.lru_cache(maxsize=4)
def docker_problem(image: str = DEFAULT_IMAGE) -> str | None:
    """None when containers of ``image`` can start here, else what to do about it."""
    if shutil.which("docker") is None:
        return "the docker CLI is not installed (apt-get install docker.io)"
    try:
        info = _docker("info", "--format", "{{.ServerVersion}}", timeout=15)
    except subprocess.TimeoutExpired:
        return "the Docker daemon does not answer (docker info timed out)"
    if info.returncode != 0:
        return f"no Docker daemon reachable: {info.stderr.strip().splitlines()[-1] if info.stderr.strip() else info.returncode}"
    if _docker("image", "inspect", image, timeout=15).returncode != 0:
        return f"image {image} is missing; build it from local files with `kag docker-image`"
    return None


def build_image(tag: str = DEFAULT_IMAGE, rootfs: str | Path | None = None, suite: str = "bookworm") -> str:
    """Build the sandbox image from a local root file system (made with debootstrap if not given)."""
    work = Path(tempfile.mkdtemp(prefix="kag-image-"))
    try:
        if rootfs is None:
            if shutil.which("debootstrap") is None:
                raise click.ClickException("debootstrap is needed to make a root file system "
                                           "(apt-get install debootstrap), or pass --rootfs DIR")
            rootfs = work / "rootfs"
            proc = subprocess.run(["debootstrap", "--variant=minbase", "--include=python3,grep,findutils",
                                   suite, str(rootfs)], capture_output=True, text=True, timeout=1800)
            if proc.returncode != 0:
                raise click.ClickException(f"debootstrap failed: {proc.stderr.strip()[-2000:]}")
        base = f"{tag.split(':')[0]}-base:latest"
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(["docker", "import", "-", base], stdin=tar.stdout, capture_output=True, text=True)
        tar.wait()
        if imported.returncode != 0:
            raise click.ClickException(f"docker import failed: {imported.stderr.strip()}")
        (work / "Dockerfile").write_text(DOCKERFILE.format(base=base))
        built = _docker("build", "-q", "-t", tag, str(work), timeout=600)
        if built.returncode != 0:
            raise click.ClickException(f"docker build failed: {built.stderr.strip()[-2000:]}")
        docker_problem.cache_clear()
        return tag
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _mountable(root: Path, rel: str, owned: bool) -> bool:
    """Whether ``rel`` exists to be mounted read-only; a link is refused: docker would mount its
    target, a host folder, into the container. No agent runs yet, so the check cannot be raced."""
    try:
        st = safefs.lstat(root, rel)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise safefs.link_refusal(rel)
    except safefs.UnsafePathError as exc:
        if owned:
            shutil.rmtree(root.parent, ignore_errors=True)
        raise RuntimeError(f"docker sandbox: {exc}") from None
    return st is not None


class DockerSandboxHandle:
    """One running container holding one episode's workspace."""

    def __init__(self, root: Path, container: str, owned: bool, timeout_s: float):
        self.root = root
        self.container = container
        self.owned = owned
        self.timeout_s = timeout_s
        self.workdir = WORKDIR
        self.network_isolated = True
        self.isolation_notes: list[str] = []
        self._procs: list[subprocess.Popen] = []
        self.closed = False

    def path(self, rel: str = "") -> Path:
        return self.root / rel if rel else self.root

    def _exec_argv(self, cwd: str | None, interactive: bool = False) -> list[str]:
        where = WORKDIR if cwd is None else (cwd if cwd.startswith("/") else f"{WORKDIR}/{cwd}")
        return ["docker", "exec", *(["-i"] if interactive else []), "-w", where, self.container]

    def run(self, cmd: str, timeout: float | None = None, cwd: str | None = None) -> CommandResult:
        limit = self.timeout_s if timeout is None else timeout
        start = time.monotonic()
        # `timeout` inside the container kills the command there; killing `docker exec` would not.
        argv = self._exec_argv(cwd) + ["timeout", "--signal=KILL", f"{max(limit, 0.1):.1f}", "bash", "-c", cmd]
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=limit + 30)
        except subprocess.TimeoutExpired as exc:
            return CommandResult(-9, (exc.stdout or b"").decode(errors="replace"),
                                 (exc.stderr or b"").decode(errors="replace"), True, time.monotonic() - start)
        timed_out = proc.returncode in (124, 137) and time.monotonic() - start >= limit
        return CommandResult(-9 if timed_out else proc.returncode, proc.stdout.decode(errors="replace"),
                             proc.stderr.decode(errors="replace"), timed_out, time.monotonic() - start)

    def _popen(self, argv: list[str], **kw: Any) -> subprocess.Popen:
        if self.closed:
            raise RuntimeError("the sandbox is closed")
        proc = subprocess.Popen(argv, start_new_session=True, **kw)
        self._procs = [p for p in self._procs if p.poll() is None] + [proc]
        return proc

    def open_shell(self) -> subprocess.Popen:
        return self._popen(self._exec_argv(None, interactive=True) + ["bash", "--noprofile", "--norc"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0)

    def spawn(self, cmd: str, cwd: str | None = None) -> subprocess.Popen:
        return self._popen(self._exec_argv(cwd) + ["bash", "-c", cmd], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
        _docker("rm", "-f", self.container, timeout=60)
        if self.owned:
            shutil.rmtree(self.root.parent, ignore_errors=True)

    def __enter__(self) -> "DockerSandboxHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DockerSandbox:
    """Configured once per run; ``start`` makes one container per episode.

    Environment: nothing of the host's reaches the container (``docker run``/``exec`` get no
    host variables): commands see the image's PATH, HOME=/home/agent (the container's), KAG_BRIDGE
    when a bridge is given, and the ``env`` option (NAME=VALUE pairs the task needs).
    """

    def __init__(self, image: str = DEFAULT_IMAGE, cpus: float = 2.0, memory: str = "4g", pids: int = 512,
                 timeout_s: float = 600.0, bridge_dir: str | None = None, copy: bool = True,
                 user: str = "agent", protected: tuple[str, ...] = PROTECTED_PATHS,
                 env: dict[str, str] | None = None):
        self.image = image
        self.cpus, self.memory, self.pids = cpus, memory, pids
        self.timeout_s = timeout_s
        self.bridge_dir = bridge_dir
        self.copy = copy
        self.user = user
        self.protected = protected
        self.env = {str(k): str(v) for k, v in (env or {}).items()}

    @staticmethod
    def check_available() -> str | None:
        return docker_problem(DEFAULT_IMAGE)

    def start(self, workspace_dir: str | Path | None = None, bridge_dir: str | Path | None = None) -> DockerSandboxHandle:
        problem = docker_problem(self.image)
        if problem:
            raise RuntimeError(f"docker sandbox unavailable: {problem}")
        owned = self.copy or workspace_dir is None
        if owned:
            root = Path(tempfile.mkdtemp(prefix="kag-docker-")) / "workspace"
            if workspace_dir is not None:
                shutil.copytree(workspace_dir, root, symlinks=True)
            else:
                root.mkdir()
        else:
            root = Path(workspace_dir).resolve()
        # The container's unprivileged user must write the agent's files (protected ones are
        # mounted read-only below, whatever their mode).
        os.chmod(root, 0o777)
        for sub in root.rglob("*"):
            if not sub.is_symlink():
                os.chmod(sub, 0o777 if sub.is_dir() else 0o666)
        name = f"kag-{uuid.uuid4().hex[:12]}"
        argv = ["run", "-d", "--name", name, "--network", "none", "--cpus", str(self.cpus), "--memory", self.memory,
                "--pids-limit", str(self.pids), "--read-only", "--tmpfs", "/tmp:rw,exec,size=512m",
                "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", self.user,
                "-v", f"{root}:{WORKDIR}"]
        for pattern in self.protected:
            rel = pattern[:-3] if pattern.endswith("/**") else pattern
            if _mountable(root, rel, owned):
                argv += ["-v", f"{root / rel}:{WORKDIR}/{rel}:ro"]
        for key, value in self.env.items():  # always NAME=VALUE: a bare NAME would copy the host's value
            argv += ["-e", f"{key}={value}"]
        bridge = bridge_dir or self.bridge_dir
        if bridge:
            argv += ["-v", f"{bridge}:{BRIDGE_DIR}", "-e", f"KAG_BRIDGE={BRIDGE_DIR}/eval.sock"]
        argv += ["-w", WORKDIR, self.image, "sleep", "infinity"]
        started = _docker(*argv, timeout=120)
        if started.returncode != 0:
            raise RuntimeError(f"docker run failed: {started.stderr.strip()}")
        return DockerSandboxHandle(root, name, owned, self.timeout_s)


@hookimpl
def kag_register_sandboxes(register) -> None:
    register("docker", DockerSandbox)


@hookimpl
def kag_register_commands(cli) -> None:
    @cli.command(name="docker-image")
    @click.option("--tag", default=DEFAULT_IMAGE, show_default=True)
    @click.option("--rootfs", type=click.Path(file_okay=False, exists=True),
                  help="A root file system folder to import (default: make one with debootstrap).")
    def docker_image(tag: str, rootfs: str | None) -> None:
        """Build the docker sandbox's image from local files (no pulls)."""
        click.echo(f"built {build_image(tag, rootfs)}")
