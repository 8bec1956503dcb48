"""The first process of a docker evaluation container: trusted code, on the container's side.

``python -m kag.plugins.sandboxes.docker_inside`` is PID 1 of a container that
``docker_eval.ContainerEvaluator`` starts for one build or one evaluation. It reads one request
line on stdin (a JSON object with a per-run secret ``token``), does the work with the ordinary
trusted code (``kag.core.eval.orchestrator.build.build_solution`` or ``kag.core.eval.orchestrator.evaluate.evaluate``, whose judge
then drives the candidate that imports the solution) and writes one line,
``KAG-RESULT <token> <json>``, on the container's stdout. The host believes only that line.

Why the candidate cannot forge it, though it runs in this container as the same user:
- before anything else runs here this process makes itself non-dumpable (PR_SET_DUMPABLE 0), so
  no other process of the user can ptrace it or open its ``/proc/1/fd``, ``mem`` or ``environ``
  (the container has no CAP_SYS_PTRACE): the request and the token stay in this process;
- the container's stdout stays on one private descriptor of this process only: fd 1 is pointed
  at stderr and fd 0 at /dev/null before the judge is spawned, so nothing started here inherits
  the channel (the judge also sends the candidate's own stdout/stderr to a capture FIFO);
- as PID 1 of its PID namespace this process cannot be killed from inside, and when it exits
  the kernel kills everything else in the container, so nothing writes after the result;
- a line without the token is ignored by the host anyway.
Imports only the standard library until the request is read; the rest comes from kag.core.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

RESULT_TAG = "KAG-RESULT"
PR_SET_DUMPABLE = 4
MAX_REQUEST = 64 * 1024 * 1024
CACHE_RO = "/kag-cache"  # the episode's build cache (read-write only in build containers)
BASELINES_RO = "/kag-baselines"  # baselines.json, written by the host only
CACHE_RW = "/tmp/kag-cache"  # what an evaluation may write: its own copy, gone with the container


def make_unreachable() -> None:
    """PR_SET_DUMPABLE 0: no process of this user may ptrace this one or open its /proc files."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def read_request() -> dict[str, Any]:
    """The one request line on stdin (read whole before anything else starts here)."""
    data = bytearray()
    while not data.endswith(b"\n") and len(data) < MAX_REQUEST:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        data += chunk
    request = json.loads(data)
    if not isinstance(request, dict):
        raise ValueError("the request is not a JSON object")
    return request


def hide_channel() -> int:
    """Keep the container's stdout on one private, non-inheritable descriptor and return it; fd 1
    becomes stderr and fd 0 /dev/null for everything started from here on."""
    private = os.dup(1)  # os.dup gives a non-inheritable descriptor: never passed on through exec
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return private


def _plugins(spec: dict[str, Any]) -> Any:
    """The host's plugin registry, rebuilt from names (plugin objects never cross processes)."""
    from kag.plugin import Plugins

    plugins = Plugins(load_entrypoints=bool(spec.get("entrypoints", True)), builtins=tuple(spec["builtins"]))
    plugins.select({kind: list(names) for kind, names in spec.get("selection", {}).items()})
    return plugins


def do_build(request: dict[str, Any]) -> dict[str, Any]:
    """Compile into the episode's cache; no solution code runs in a build container."""
    import attrs

    from kag.plugin import build_solution
    from kag.plugin import Solution, from_dict

    os.umask(0)  # the host's user (maybe not ours) must be able to delete what lands in the cache
    os.environ["KAG_CACHE_DIR"] = CACHE_RO  # torch facts too (kag.core.eval.orchestrator.build.torch_info), for later builds
    backend = _plugins(request["plugins"]).create("backend", request["backend"])
    solution = from_dict(Solution, request["solution"])
    built = build_solution(solution, backend, Path("/tmp/kag-build"), cache_dir=Path(CACHE_RO),
                           timeout_s=float(request["timeout_s"]))
    return attrs.asdict(built)


def _private_cache() -> str:
    """A writable cache whose build objects are the read-only episode cache's (a build there is
    all hits: the host built it first) and whose baselines.json is a copy of the host's."""
    root = Path(CACHE_RW)
    root.mkdir(parents=True, exist_ok=True)
    for sub in ("objects", "modules"):
        if (Path(CACHE_RO) / sub).is_dir():
            (root / sub).symlink_to(Path(CACHE_RO) / sub)
    if (Path(CACHE_RO) / "toolchain").is_dir():  # small, and read under a lock taken in its folder
        shutil.copytree(Path(CACHE_RO) / "toolchain", root / "toolchain")
    if (Path(CACHE_RO) / "private").is_dir():  # the build's key: its signed objects verify here
        shutil.copytree(Path(CACHE_RO) / "private", root / "private")
        os.chmod(root / "private", 0o700)
    try:
        shutil.copyfile(Path(BASELINES_RO) / "baselines.json", root / "baselines.json")
    except OSError:
        pass  # none yet (or unreadable): the judge times the baselines
    return str(root)


def do_evaluate(request: dict[str, Any]) -> dict[str, Any]:
    """The whole trusted evaluation (guards, build from the cache, judge, candidate, reward)."""
    import attrs

    from kag.plugin import EvalOptions, evaluate
    from kag.plugin import Solution, Task, from_dict, to_dict

    cache = _private_cache()
    os.environ["KAG_CACHE_DIR"] = cache
    options = attrs.evolve(from_dict(EvalOptions, request["options"]), cache_dir=cache)
    result = evaluate(from_dict(Task, request["task"]), from_dict(Solution, request["solution"]), options,
                      _plugins(request["plugins"]))
    return to_dict(result)


ACTIONS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {"build": do_build, "evaluate": do_evaluate}


def main() -> int:
    make_unreachable()
    request = read_request()
    channel = hide_channel()
    token = str(request.get("token", ""))
    try:
        payload = {"ok": True, "value": ACTIONS[request["action"]](request)}
    except BaseException as exc:  # noqa: BLE001 - the host gets the reason
        payload = {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                   "traceback": traceback.format_exc()[-4000:]}
    data = f"{RESULT_TAG} {token} {json.dumps(payload, default=str)}\n".encode()
    while data:
        data = data[os.write(channel, data):]
    return 0


if __name__ == "__main__":
    sys.exit(main())
