"""The ``local`` sandbox: the workspace in a temp dir, commands as limited subprocesses.

Limits: a wall-clock timeout per command (the process group is killed), an optional address-space
limit (RLIMIT_AS; off by default because a CUDA context reserves far more virtual memory than it
uses), and no network where an unprivileged network namespace (``unshare -rn``) works, with empty
/tmp, /run and /dev/shm but for the episode's own folders where a mount namespace comes with it
(``unshare -rnm``, kag.core.trust.private_mounts: the host's Unix sockets, a Ray node's object store
among them, out of reach). Where they do not, the sandbox still runs and says so in
``network_isolated`` / ``isolation_notes``.
Commands get a minimal environment (``agent_environment``): no API key of the host reaches them.
Where the kernel has Landlock, every command runs confined (kag.core.trust.confine_exec): it writes only
the workspace and the episode's HOME, reads the system, Python and those two folders (never kag's
caches and key, the user's home or /proc of other processes), cannot ptrace or signal processes
outside the sandbox, and cannot make namespaces or use io_uring (seccomp).
Trusted host code that starts untrusted commands: what they run is the agent's, and they reach
the trusted evaluator only through the bridge socket (KAG_BRIDGE).
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from kag.plugin import CommandResult, hookimpl, scratch

SHELL = ["bash", "--noprofile", "--norc"]

# The host environment variables agent commands see; nothing else of the host's environment (API
# keys, tokens, the user's HOME) reaches them. PYTHONPATH lets the skill scripts find kag when they
# run without a bridge (a person's own workspace); with the bridge they need only python3 on PATH.
ENV_NAMES = frozenset({"PATH", "LANG", "LANGUAGE", "TERM", "TZ", "TORCH_CUDA_ARCH_LIST", "PYTHONPATH"})
ENV_PREFIXES = ("LC_", "CUDA_", "NVIDIA_")


def agent_environment(home: str | Path, extra: Mapping[str, str] | None = None,
                      host: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of agent commands: the allow-listed host variables, HOME, then ``extra``."""
    host = os.environ if host is None else host
    env = {k: v for k, v in host.items() if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}
    env.setdefault("PATH", os.defpath)
    env["HOME"] = env["TMPDIR"] = str(home)  # the only folders besides the workspace commands may write
    env.update(extra or {})
    return env


def _landlock() -> bool:
    from kag.plugin import landlock_abi

    return landlock_abi() > 0


def confine_prefix(workspace: Path, home: Path, private_tmp: bool = False) -> list[str]:
    """The argv prefix that confines a command to the workspace and HOME (kag.core.trust.confine_exec);
    ``private_tmp`` (in a mount namespace): the host's /tmp, /run and /dev/shm, and the Unix sockets
    in them, out of sight."""
    import sys

    from kag.plugin import trusted_stores

    protected = [part for store in trusted_stores() for part in ("--protect", store)]
    return [sys.executable, "-m", "kag.core.trust.confine_exec", "--write", str(workspace), "--write", str(home),
            *protected, "--seccomp", *(["--private-tmp"] if private_tmp else []),
            *(["--cover", os.environ["RAY_TMPDIR"]] if private_tmp and os.environ.get("RAY_TMPDIR") else []), "--"]


@functools.lru_cache(maxsize=1)
def mount_namespace_problem() -> str | None:
    """None when ``unshare -rnm`` also gives commands a mount namespace of their own (for the empty
    /tmp and /run of kag.core.trust.private_mounts), else why not."""
    try:
        proc = subprocess.run(["unshare", "-rnm", "true"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare -rnm failed: {exc}"
    return None if proc.returncode == 0 else f"unshare -rnm is not permitted here: {proc.stderr.strip() or proc.returncode}"


@functools.lru_cache(maxsize=1)
def network_namespace_problem() -> str | None:
    """None when ``unshare -rn`` gives commands an empty network namespace here, else why not."""
    if shutil.which("unshare") is None:
        return "unshare is not installed (util-linux)"
    try:
        proc = subprocess.run(["unshare", "-rn", "true"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare -rn failed: {exc}"
    if proc.returncode != 0:
        return f"unshare -rn is not permitted here: {proc.stderr.strip() or proc.returncode}"
    return None


def _limits(memory_limit_mb: int | None) -> Callable[[], None] | None:
    if not memory_limit_mb:
        return None
    limit = int(memory_limit_mb) * 1024 * 1024

    def apply() -> None:  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def kill_group(proc: subprocess.Popen, grace_s: float = 2.0) -> None:
    """SIGTERM the process group of ``proc`` (started with start_new_session), then SIGKILL."""
    if proc.poll() is not None:
        try:  # the leader is gone; its children may live on in the group
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers in the group
        except subprocess.TimeoutExpired:
            continue
        except (ProcessLookupError, PermissionError):
            pass
        return


class LocalSandboxHandle:
    """One episode's workspace on this machine and the way commands run in it."""

    def __init__(self, root: Path, *, owned: bool, timeout_s: float, memory_limit_mb: int | None,
                 isolate_network: bool, env: dict[str, str] | None, tmp_dir: str | None = None,
                 confine: bool | None = True) -> None:
        self.root = root.resolve()
        self.home = Path(scratch.mkdtemp("kag-home-", tmp_dir))  # the episode's HOME
        self.workdir = str(self.root)
        self.owned = owned
        self.timeout_s = timeout_s
        self.memory_limit_mb = memory_limit_mb
        problem = network_namespace_problem() if isolate_network else "network isolation switched off"
        self.network_isolated = problem is None
        self.isolation_notes = [] if problem is None else [f"commands have network access: {problem}"]
        private_tmp = bool(confine) and self.network_isolated and mount_namespace_problem() is None
        self.prefix = (["unshare", "-rnm"] if private_tmp else ["unshare", "-rn"]) if self.network_isolated else []
        if not private_tmp:
            why = mount_namespace_problem() if self.network_isolated and confine else \
                ("no network namespace" if confine else "commands are not confined")
            self.isolation_notes.append(f"commands can reach the host's Unix sockets in /tmp and /run (a Ray node's "
                                        f"object store, Docker's): {why}")
        if confine:
            self.prefix += confine_prefix(self.root, self.home, private_tmp)
        elif confine is not None:
            self.isolation_notes.append("commands are not confined: Landlock is switched off or missing")
        self.env = agent_environment(self.home, env)
        self._procs: list[subprocess.Popen] = []
        self.closed = False

    def path(self, rel: str = "") -> Path:
        return self.root / rel if rel else self.root

    def _cwd(self, cwd: str | None) -> str:
        return str(self.root if cwd is None else (self.root / cwd if not os.path.isabs(cwd) else Path(cwd)))

    def _popen(self, argv: list[str], cwd: str | None, **kw: Any) -> subprocess.Popen:
        if self.closed:
            raise RuntimeError("the sandbox is closed")
        proc = subprocess.Popen(self.prefix + argv, cwd=self._cwd(cwd), env=self.env, start_new_session=True,
                                preexec_fn=_limits(self.memory_limit_mb), **kw)
        self._procs = [p for p in self._procs if p.poll() is None] + [proc]
        return proc

    def run(self, cmd: str, timeout: float | None = None, cwd: str | None = None) -> CommandResult:
        limit = self.timeout_s if timeout is None else timeout
        start = time.monotonic()
        proc = self._popen(["bash", "-c", cmd], cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            kill_group(proc, grace_s=1.0)
            out, err = proc.communicate()
            timed_out = True
        return CommandResult(
            returncode=proc.returncode if not timed_out else -9,
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            timed_out=timed_out,
            elapsed_s=time.monotonic() - start,
        )

    def open_shell(self) -> subprocess.Popen:
        return self._popen(SHELL, None, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           bufsize=0)

    def spawn(self, cmd: str, cwd: str | None = None) -> subprocess.Popen:
        return self._popen(["bash", "-c", cmd], cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, bufsize=0)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for proc in self._procs:
            kill_group(proc, grace_s=0.5)
        shutil.rmtree(self.home, ignore_errors=True)
        if self.owned:
            shutil.rmtree(self.root.parent if self.root.name == "workspace" else self.root, ignore_errors=True)

    def __enter__(self) -> "LocalSandboxHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalSandbox:
    """Runs each episode in a temp copy of its workspace (or in place with ``copy=False``).

    Options: ``timeout_s`` (default per-command limit), ``memory_limit_mb`` (RLIMIT_AS per command,
    None = off), ``network`` (False = isolate where possible), ``copy``, ``keep`` (keep the temp dir
    after close), ``tmp_dir`` (where temp workspaces go), ``env`` (extra environment variables),
    ``confine`` (False: commands run unconfined; for debugging, never for training or scoring).

    Environment: commands do not inherit the host's. They get only PATH, LANG, LANGUAGE, LC_*,
    TERM, TZ, CUDA_* (CUDA_HOME, CUDA_PATH, CUDA_VISIBLE_DEVICES, ...), NVIDIA_*,
    TORCH_CUDA_ARCH_LIST and PYTHONPATH from the host (``ENV_NAMES``, ``ENV_PREFIXES``), HOME set
    to an empty folder of the episode (removed on close), KAG_BRIDGE when a bridge is given, and
    the ``env`` option; API keys and everything else stay out.
    """

    def __init__(self, timeout_s: float = 600.0, memory_limit_mb: int | None = None, network: bool = False,
                 copy: bool = True, keep: bool = False, tmp_dir: str | None = None,
                 env: dict[str, str] | None = None, confine: bool = True) -> None:
        self.timeout_s = float(timeout_s)
        self.confine = bool(confine)
        self.memory_limit_mb = int(memory_limit_mb) if memory_limit_mb else None
        self.network = bool(network)
        self.copy = bool(copy)
        self.keep = bool(keep)
        self.tmp_dir = tmp_dir
        self.env = dict(env or {})

    @staticmethod
    def check_available() -> str | None:
        return None if shutil.which("bash") else "bash is not installed"

    @staticmethod
    def isolation_info() -> str:
        """One line for `kag plugins`-style listings: is the network cut off here?"""
        problem = network_namespace_problem()
        return "no network (unshare -rn)" if problem is None else f"network isolation unavailable: {problem}"

    def start(self, workspace_dir: str | Path | None = None,
              bridge_dir: str | Path | None = None) -> LocalSandboxHandle:
        """``bridge_dir``: the evaluation bridge's folder; its socket is given to commands as KAG_BRIDGE."""
        owned = workspace_dir is None or self.copy
        if owned:
            base = Path(scratch.mkdtemp("kag-ws-", self.tmp_dir))
            root = base / "workspace"
            if workspace_dir is None:
                root.mkdir()
            else:
                src = Path(workspace_dir)
                if not src.is_dir():
                    shutil.rmtree(base, ignore_errors=True)
                    raise FileNotFoundError(f"workspace {src} is not a directory; create it (kag run does) first")
                shutil.copytree(src, root, symlinks=True)
        else:
            root = Path(workspace_dir)  # type: ignore[arg-type]
            if not root.is_dir():
                raise FileNotFoundError(f"workspace {root} is not a directory; create it first")
        return LocalSandboxHandle(root, owned=owned and not self.keep, timeout_s=self.timeout_s,
                                  memory_limit_mb=self.memory_limit_mb, isolate_network=not self.network,
                                  env={**self.env, **({"KAG_BRIDGE": str(Path(bridge_dir) / "eval.sock")}
                                                      if bridge_dir else {})}, tmp_dir=self.tmp_dir,
                                  confine=self.confine and _landlock() or (False if self.confine else None))


@hookimpl
def kag_register_sandboxes(register) -> None:
    register("local", LocalSandbox)
