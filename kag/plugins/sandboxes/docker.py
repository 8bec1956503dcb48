"""The ``docker`` sandbox: each episode in its own container, and its solutions in containers too.

The agent's container gets the workspace as a bind mount (protected files mounted read-only over
it), CPU, memory and process limits, a read-only root file system, no capabilities and no
network. The skill scripts reach the trusted evaluator through the evaluation bridge's socket,
mounted at /kag-bridge. No solution code runs on the host: the handle's ``build`` and
``evaluate`` (``kag.core.agent.sandbox.SandboxEvaluator``) run every build and evaluation the episode asks
for, its final re-score included, in fresh build and evaluation containers (``docker_eval``
says what is mounted there, and how the verdict comes back unforged).

Containers are made, run, exec'ed into, killed and removed with the docker SDK (docker-py).
Images are built from local files only (``kag docker-image`` imports a Debian root file system
made by debootstrap, then adds the unprivileged user); nothing is pulled. Host side, trusted.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import click

from kag.plugin import CommandResult, PROTECTED_PATHS, hookimpl, safefs

DEFAULT_IMAGE = "kag-sandbox:latest"
WORKDIR = "/workspace"
BRIDGE_DIR = "/kag-bridge"
DOCKERFILE = """\
FROM {base}
RUN useradd --create-home --uid 1000 agent && mkdir -p /workspace && chown agent /workspace
ENV PYTHONDONTWRITEBYTECODE=1
WORKDIR /workspace
"""


@contextlib.contextmanager
def client(timeout: float | None = 120) -> Iterator[Any]:
    """A docker SDK client for the daemon the environment names (DOCKER_HOST, else the socket),
    closed after the block."""
    import docker

    api = docker.from_env(timeout=timeout)
    try:
        yield api
    finally:
        api.close()


@functools.lru_cache(maxsize=4)
def docker_problem(image: str = DEFAULT_IMAGE) -> str | None:
    """None when containers of ``image`` can start here, else what to do about it."""
    try:
        import docker
    except ImportError:
        from kag.plugin import install_hint

        return f"the docker sandbox needs the docker Python SDK, which is not installed: {install_hint('docker')}"
    if shutil.which("docker") is None:  # the bash tool's shell is a `docker exec -i` process
        return "the docker CLI is not installed (apt-get install docker.io)"
    try:
        with client(timeout=15) as api:
            api.ping()
            api.images.get(image)
    except docker.errors.ImageNotFound:
        return f"image {image} is missing; build it from local files with `kag docker-image`"
    except docker.errors.DockerException as exc:
        return f"no Docker daemon reachable: {str(exc).splitlines()[0][:300]}"
    return None


def build_image(tag: str = DEFAULT_IMAGE, rootfs: str | Path | None = None, suite: str = "bookworm") -> str:
    """Build the sandbox image from a local root file system (made with debootstrap if not given)."""
    import docker

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
        base = f"{tag.split(':')[0]}-base"
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        try:
            with client(timeout=1800) as api:
                reply = api.api.import_image(src=tar.stdout, repository=base, tag="latest", stream_src=True)
                if '"error' in str(reply):  # the daemon reports a failed import in the reply body
                    raise click.ClickException(f"docker import failed: {str(reply)[-2000:]}")
                context = work / "context"  # the Dockerfile alone: the root file system is not sent again
                context.mkdir()
                (context / "Dockerfile").write_text(DOCKERFILE.format(base=f"{base}:latest"))
                api.images.build(path=str(context), tag=tag, rm=True, forcerm=True, pull=False)
        except docker.errors.BuildError as exc:
            raise click.ClickException(f"docker build failed: {exc}") from None
        except docker.errors.DockerException as exc:
            raise click.ClickException(f"docker import/build failed: {exc}") from None
        finally:
            tar.stdout.close()
            tar.wait()
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
    """One running container holding one episode's workspace, and the episode's evaluator."""

    def __init__(self, root: Path, container: str, owned: bool, timeout_s: float, evaluator: Any):
        self.root = root
        self.container = container
        self.owned = owned
        self.timeout_s = timeout_s
        self.evaluator = evaluator  # docker_eval.ContainerEvaluator
        self.workdir = WORKDIR
        self.network_isolated = True
        self.isolation_notes: list[str] = []
        self._procs: list[subprocess.Popen] = []
        self.closed = False

    def path(self, rel: str = "") -> Path:
        return self.root / rel if rel else self.root

    @staticmethod
    def _where(cwd: str | None) -> str:
        return WORKDIR if cwd is None else (cwd if cwd.startswith("/") else f"{WORKDIR}/{cwd}")

    def run(self, cmd: str, timeout: float | None = None, cwd: str | None = None) -> CommandResult:
        import docker
        import requests

        limit = max(self.timeout_s if timeout is None else timeout, 0.1)
        start = time.monotonic()
        if self.closed:
            raise RuntimeError("the sandbox is closed")
        # `timeout` inside the container kills the command there; ending the exec call would not.
        argv = ["timeout", "--signal=KILL", f"{limit:.1f}", "bash", "-c", cmd]
        try:
            with client(timeout=limit + 30) as api:
                exec_id = api.api.exec_create(self.container, argv, workdir=self._where(cwd))["Id"]
                out, err = api.api.exec_start(exec_id, demux=True)
                code = api.api.exec_inspect(exec_id).get("ExitCode")
        except (requests.exceptions.RequestException, OSError):
            return CommandResult(-9, "", "", True, time.monotonic() - start)
        except docker.errors.DockerException as exc:
            return CommandResult(125, "", f"docker exec failed: {exc}", False, time.monotonic() - start)
        code = -1 if code is None else int(code)
        timed_out = code in (124, 137) and time.monotonic() - start >= limit
        return CommandResult(-9 if timed_out else code, (out or b"").decode(errors="replace"),
                             (err or b"").decode(errors="replace"), timed_out, time.monotonic() - start)

    def _popen(self, argv: list[str], **kw: Any) -> subprocess.Popen:
        if self.closed:
            raise RuntimeError("the sandbox is closed")
        proc = subprocess.Popen(argv, start_new_session=True, **kw)
        self._procs = [p for p in self._procs if p.poll() is None] + [proc]
        return proc

    # The shell and background jobs stay `docker exec` CLI processes: the bash tool needs a local
    # subprocess.Popen whose pipes it selects on and whose process group it kills, and the SDK's
    # exec gives only a socket over the daemon's HTTP connection.
    def _exec_argv(self, cwd: str | None, interactive: bool = False) -> list[str]:
        return ["docker", "exec", *(["-i"] if interactive else []), "-w", self._where(cwd), self.container]

    def open_shell(self) -> subprocess.Popen:
        return self._popen(self._exec_argv(None, interactive=True) + ["bash", "--noprofile", "--norc"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0)

    def spawn(self, cmd: str, cwd: str | None = None) -> subprocess.Popen:
        return self._popen(self._exec_argv(cwd) + ["bash", "-c", cmd], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0)

    def build(self, solution: Any, options: Any, plugins: Any) -> Any:
        """Compile in a build container (``kag.core.agent.sandbox.SandboxEvaluator``)."""
        return self.evaluator.build(solution, options, plugins)

    def evaluate(self, task: Any, solution: Any, options: Any = None, plugins: Any = None, pool: Any = None) -> Any:
        """Evaluate in an evaluation container; still works after ``close`` (the final re-score)."""
        return self.evaluator.evaluate(task, solution, options, plugins, pool=pool)

    def close(self) -> None:
        """Stop the agent's container and remove the workspace copy; the evaluator's build cache
        goes when the handle is collected (an episode's final re-score comes after this)."""
        import docker

        if self.closed:
            return
        self.closed = True
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
        try:
            with client(timeout=60) as api:
                api.containers.get(self.container).remove(force=True)
        except docker.errors.DockerException:
            pass
        if self.owned:
            shutil.rmtree(self.root.parent, ignore_errors=True)

    def __enter__(self) -> "DockerSandboxHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _paths(value: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    """A list option given as a sequence or as one comma-separated string (from a CLI flag)."""
    if not value:
        return ()
    return tuple(p.strip() for p in value.split(",") if p.strip()) if isinstance(value, str) else tuple(value)


class DockerSandbox:
    """Configured once per run; ``start`` makes one container per episode.

    Options for the agent's container: ``image``, ``cpus``, ``memory``, ``pids``, ``timeout_s``,
    ``copy``, ``user``. For the build and evaluation containers (``docker_eval``): ``eval_memory``
    (judge + candidate together), ``eval_cpus`` (None: no CPU quota, which would distort CPU
    timings), ``eval_pids``, ``eval_shm`` (/dev/shm: the CPU backend's tensors travel there),
    ``eval_tmp`` (the tmpfs /tmp), ``eval_user``, ``toolchain`` (host folders with the compilers
    and system libraries, read-only; default /usr), ``extra_mounts`` (more read-only host paths,
    e.g. a CUDA toolkit outside /usr) and ``gpu_runtime`` (a runtime to name for GPU containers).
    ``env``: NAME=VALUE pairs the task needs.

    Environment: nothing of the host's reaches the container (``docker run``/``exec`` get no
    host variables): commands see the image's PATH, HOME=/home/agent (the container's), KAG_BRIDGE
    when a bridge is given, and the ``env`` option (NAME=VALUE pairs the task needs).
    """

    def __init__(self, image: str = DEFAULT_IMAGE, cpus: float = 2.0, memory: str = "4g", pids: int = 512,
                 timeout_s: float = 600.0, bridge_dir: str | None = None, copy: bool = True,
                 user: str = "agent", protected: tuple[str, ...] = PROTECTED_PATHS, eval_memory: str = "16g",
                 eval_cpus: float | None = None, eval_pids: int = 4096, eval_shm: str = "2g", eval_tmp: str = "8g",
                 eval_user: str | None = None, toolchain: Any = ("/usr",), extra_mounts: Any = (),
                 gpu_runtime: str | None = None, env: dict[str, str] | None = None):
        from kag.plugins.sandboxes.docker_run import EvalContainerConfig

        self.image = image
        self.cpus, self.memory, self.pids = float(cpus), memory, int(pids)
        self.timeout_s = float(timeout_s)
        self.bridge_dir = bridge_dir
        self.copy = copy
        self.user = user
        self.protected = protected
        self.env = {str(k): str(v) for k, v in (env or {}).items()}
        self.eval_config = EvalContainerConfig(
            image=image, user=eval_user or user, memory=eval_memory, cpus=float(eval_cpus) if eval_cpus else None,
            pids=int(eval_pids), shm_size=eval_shm, tmp_size=eval_tmp, toolchain=_paths(toolchain),
            extra_mounts=_paths(extra_mounts), gpu_runtime=gpu_runtime or None)
        self._eval_state: Any = None

    @staticmethod
    def check_available() -> str | None:
        return docker_problem(DEFAULT_IMAGE)

    def evaluator(self) -> Any:
        """A fresh episode evaluator over the state every episode of this sandbox shares."""
        from kag.plugins.sandboxes.docker_eval import ContainerEvaluator, EvalState

        if self._eval_state is None:
            self._eval_state = EvalState(self.eval_config)
        return ContainerEvaluator(self._eval_state)

    def start(self, workspace_dir: str | Path | None = None,
              bridge_dir: str | Path | None = None) -> DockerSandboxHandle:
        import docker
        from docker.types import Mount

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
        mounts = [Mount(WORKDIR, str(root), type="bind")]
        for pattern in self.protected:
            rel = pattern[:-3] if pattern.endswith("/**") else pattern
            if _mountable(root, rel, owned):
                mounts.append(Mount(f"{WORKDIR}/{rel}", str(root / rel), type="bind", read_only=True))
        env = dict(self.env)  # always NAME=VALUE: nothing of the host's environment is copied
        bridge = bridge_dir or self.bridge_dir
        if bridge:
            mounts.append(Mount(BRIDGE_DIR, str(Path(bridge).resolve()), type="bind"))
            env["KAG_BRIDGE"] = f"{BRIDGE_DIR}/eval.sock"
        name = f"kag-{uuid.uuid4().hex[:12]}"
        try:
            with client(timeout=120) as api:
                api.containers.run(self.image, ["sleep", "infinity"], detach=True, name=name, network_mode="none",
                                   nano_cpus=int(self.cpus * 1e9), mem_limit=self.memory, pids_limit=self.pids,
                                   read_only=True, tmpfs={"/tmp": "rw,exec,size=512m"}, cap_drop=["ALL"],
                                   security_opt=["no-new-privileges"], user=self.user, mounts=mounts,
                                   environment=env, working_dir=WORKDIR, labels={"kag": "sandbox"})
        except docker.errors.DockerException as exc:
            if owned:
                shutil.rmtree(root.parent, ignore_errors=True)
            raise RuntimeError(f"docker run failed: {exc}") from None
        return DockerSandboxHandle(root, name, owned, self.timeout_s, self.evaluator())


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
