"""torch's headers precompiled once for every binding's compile.

A binding (``kernels/*_binding.cpp``, the fixed ``binding.cpp``) spends most of its compile parsing
torch and pybind11, the same headers in every solution: 9 of 12 s of one on the 2-core VM. GCC reads
a precompiled header instead when ``-include NAME`` finds ``NAME.gch`` beside ``NAME``, compiled with
the same flags; otherwise (no file, other flags, another compiler) it parses ``NAME`` itself, so an
object is the same with or without it and its cache key does not depend on it.

Trusted side. The header is kag's own text (``HEADER``); its ``.gch`` is compiled by the build,
confined like every compile (no compile can write the store), and kept signed in the user's store
(``pch_root``, its own key). Each build copies the store's file into its own folder, checks the MAC
of the copy, and links the copy into each unit's compile tree: a file swapped in the store after the
check never reaches a compiler, and nothing that can write a build's folder can write the store's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import hmac
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

from kag.core.trust import integrity

HEADER = ("// kag: torch's headers, precompiled for the bindings' compiles (kag.core.eval.orchestrator.pch)\n"
          "#include <torch/types.h>\n#include <torch/csrc/utils/pybind.h>\n")
NAME = f"kag_torch_{hashlib.sha256(HEADER.encode()).hexdigest()[:12]}.h"
KIND = "pch"
MIN_LEFT_S = 90.0  # a build with less time left compiles its bindings without building the header first
CHUNK = 1 << 22


@functools.lru_cache(maxsize=None)
def is_gcc(cxx: str) -> bool:
    """GCC reads ``.gch`` files; clang's precompiled headers are another format and flag."""
    try:
        out = subprocess.run([cxx, "-dM", "-E", "-x", "c++", os.devnull], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "__GNUC__" in out and "__clang__" not in out


def with_header(command: list[str]) -> list[str]:
    """A binding's compile command (``COMPILER FLAGS... -c SRC -o OBJ``) that includes ``NAME``
    first, where the compiler is GCC; otherwise the command as it was."""
    if "-c" not in command or "nvcc" in os.path.basename(command[0]) or not is_gcc(command[0]):
        return command
    at = command.index("-c")
    return [*command[:at], "-include", NAME, *command[at:]]


def _mac_file(key: bytes, name: str, path: Path) -> str:
    """``integrity.sign`` of the file's bytes, read in chunks (530 MB)."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    size = path.stat().st_size
    for part in (KIND.encode(), name.encode()):
        mac.update(len(part).to_bytes(8, "little"))
        mac.update(part)
    mac.update(size.to_bytes(8, "little"))
    seen = 0
    with open(path, "rb") as src:
        while chunk := src.read(CHUNK):
            seen += len(chunk)
            mac.update(chunk)
    if seen != size:  # it changed under us: whatever it is now, not what was signed
        return ""
    return mac.hexdigest()


OFF = "off"  # KAG_PCH_DIR=off: the bindings parse the header (a docker build container: its /tmp dies with it)


def pch_root() -> Path:
    """``$KAG_PCH_DIR``, else ``$XDG_CACHE_HOME/kag-pch`` (``~/.cache/kag-pch``): one per user, not per
    build cache (a header depends only on the compiler and torch, and takes 22 s to compile on the
    2-core VM, more than a fresh cache's first builds would save), with its own key."""
    if os.environ.get("KAG_PCH_DIR"):
        return Path(os.environ["KAG_PCH_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kag-pch"


class TorchPch:
    """The precompiled header of one build: found in the user's store (``pch_root``), or compiled
    once and stored. Any failure here (a read-only home, a refused entry) means only that the
    bindings parse the header themselves."""

    def __init__(self, out_dir: Path, compile_header: Callable[[list[str], Path], Any], root: Path | None = None,
                 host: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext):
        self.folder = root or pch_root()
        self.host = host  # held while 530 MB are copied and checked (timing_lock.host_work): no timing beside it
        self.local = out_dir / "pch"
        self.mac_key = b""
        self.compile_header = compile_header  # (command, cwd) -> outcome with .ok: run confined, as a unit's
        self.lock = threading.Lock()
        self.ready: dict[str, Path | None] = {}  # flags' key -> the verified local .gch (None: parse the header)
        self.placed: list[Path] = []  # its links in the units' trees

    def place(self, command: list[str], tree: Path, deadline: float) -> None:
        """Put ``NAME`` (and its ``.gch`` where there is one for these flags) in a unit's ``tree``."""
        if "-include" not in command:
            return
        (tree / NAME).write_text(HEADER, encoding="utf-8")
        gch = self._gch(command, deadline)
        if gch is not None:
            with self.lock:
                self.placed.append(tree / f"{NAME}.gch")
            try:
                os.link(gch, tree / f"{NAME}.gch")
            except OSError:  # another filesystem
                shutil.copyfile(gch, tree / f"{NAME}.gch")

    def close(self) -> None:
        """Remove this build's copy and its links (530 MB a build folder would otherwise keep)."""
        for link in self.placed:
            link.unlink(missing_ok=True)
        shutil.rmtree(self.local, ignore_errors=True)

    def _gch(self, command: list[str], deadline: float) -> Path | None:
        flags = command[1:command.index("-include")]
        key = hashlib.sha256("\0".join([command[0], *flags, HEADER]).encode()).hexdigest()[:24]
        with self.lock:  # a build's binding units share one
            if key not in self.ready:
                if os.environ.get("KAG_PCH_DIR") == OFF:
                    self.ready[key] = None
                    return None
                try:
                    self.mac_key = self.mac_key or integrity.load_key(self.folder)
                    self.ready[key] = self._find(key) or self._compile(key, [command[0], *flags], deadline)
                except (OSError, integrity.IntegrityError):
                    self.ready[key] = None
            return self.ready[key]

    def _find(self, key: str) -> Path | None:
        cached, mac = self.folder / f"{key}.gch", self.folder / f"{key}.gch{integrity.MAC_SUFFIX}"
        if not cached.exists() or not mac.exists():
            return None
        local = integrity.ensure_dir(self.local / key) / f"{NAME}.gch"
        try:  # the build's own copy first, then its check (0.2 + 0.4 s for 530 MB on the VM): a link would
            # share the store's file with whatever can write this build's folder, and through it every build's
            with self.host():
                shutil.copyfile(cached, local)
                good = hmac.compare_digest(_mac_file(self.mac_key, key, local), mac.read_text().strip())
        except OSError:
            good = False
        if not good:
            local.unlink(missing_ok=True)
            return None
        return local

    def _compile(self, key: str, compiler_flags: list[str], deadline: float) -> Path | None:
        """Compile the header here, unless another build is compiling it (then this one parses it)
        or too little of this build's time is left; publish it to the store."""
        if deadline - time.monotonic() < MIN_LEFT_S:
            return None
        integrity.ensure_dir(self.folder)
        fd = os.open(self.folder / f"{key}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, integrity.LOCK_MODE)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    return None
                raise
            found = self._find(key)  # published while this build waited for nothing
            if found is not None:
                return found
            work = integrity.ensure_dir(self.local / key)
            (work / NAME).write_text(HEADER, encoding="utf-8")
            outcome = self.compile_header([*compiler_flags, "-x", "c++-header", NAME, "-o", f"{NAME}.gch"], work)
            local = work / f"{NAME}.gch"
            if not getattr(outcome, "ok", False) or not local.exists():
                local.unlink(missing_ok=True)
                return None
            tmp = self.folder / f".{key}.gch.{os.getpid()}-{threading.get_ident()}.tmp"
            shutil.copyfile(local, tmp)
            mac = _mac_file(self.mac_key, key, tmp)
            os.replace(tmp, self.folder / f"{key}.gch")
            integrity.atomic_write(self.folder / f"{key}.gch{integrity.MAC_SUFFIX}", mac.encode())
            return local
        finally:
            os.close(fd)
