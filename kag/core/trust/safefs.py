"""Files in an agent-writable folder, read and written by the trusted side without following links.

Trusted side of the trust boundary (DESIGN.md): the agent, or a process it left running, can turn
any path of its workspace into a link at any moment, so a path is never checked first and opened
later. Every component is opened relative to its parent's descriptor with O_NOFOLLOW (and without
``..``), so the kernel refuses a link anywhere on the way at the moment of use, and what is read
or written is inside the folder by construction. Only regular files with a single hard link are
read or written; FIFOs, sockets and devices are refused without blocking. A refusal is an
``UnsafePathError`` whose message is one line naming the file and what to do about it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Iterator

import attrs

MAX_FILE_BYTES = 16 << 20
MAX_DEPTH = 64
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LINK_ERRNOS = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)
NO_LINKS = "links are not allowed in the workspace"


class UnsafePathError(Exception):
    """A path the trusted side refuses to open (a link, not a regular file, outside the folder)."""


@attrs.frozen
class Entry:
    """One name found by ``walk``: its path relative to the folder and its kind, never followed."""

    rel: str
    kind: str  # "file", "dir", "link" or "other" (FIFO, socket, device)


def parts_of(rel: str | PurePosixPath) -> list[str]:
    """The components of a relative path; absolute paths and ``..`` are refused, ``.`` dropped."""
    path = PurePosixPath(rel)
    if path.is_absolute() or ".." in path.parts:
        raise UnsafePathError(f"{rel}: only paths inside the workspace without '..' can be used")
    return [p for p in path.parts if p not in ("", ".")]


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def link_refusal(shown: str, what: str = "file") -> UnsafePathError:
    """The one line an agent reads for a link: which name, that links are refused, the fix."""
    return UnsafePathError(f"{shown} is a symbolic link: {NO_LINKS}; replace it with a real {what}")


def _refusal(shown: str, dir_fd: int, name: str, error: OSError) -> Exception:
    """Why opening ``name`` failed, as the agent should read it (a link is named as one)."""
    try:
        kind = _kind(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        kind = ""
    # ENOTDIR on a name that is not a file now: it was a link when opened, swapped since
    swapped = error.errno == errno.ENOTDIR and kind not in ("file", "other")
    if kind == "link" or error.errno == errno.ELOOP or swapped:
        return link_refusal(shown, "folder" if error.errno == errno.ENOTDIR else "file")
    if isinstance(error, FileNotFoundError):
        return FileNotFoundError(f"{shown} does not exist")
    if error.errno == errno.ENOTDIR:
        return UnsafePathError(f"{shown} is not a folder")
    return UnsafePathError(f"{shown}: cannot be opened ({os.strerror(error.errno or 0)})")


def _open_dirs(root_fd: int, parts: list[str], create: bool = False) -> int:
    """A new descriptor of the folder ``parts`` under ``root_fd``, walked one link-free step at a time."""
    fd = os.dup(root_fd)
    try:
        for i, name in enumerate(parts):
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
            try:
                nxt = os.open(name, _DIR, dir_fd=fd)
            except OSError as exc:
                raise _refusal("/".join(parts[:i + 1]), fd, name, exc) from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def open_root(root: str | Path) -> Iterator[int]:
    """The folder itself; links in ``root`` (chosen by the trusted side) are followed, none below it."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def open_dir(root: str | Path, rel: str | PurePosixPath = "", *, create: bool = False) -> Iterator[int]:
    """A descriptor of the folder ``rel`` under ``root`` (made, with its parents, if ``create``)."""
    parts = parts_of(rel)
    with open_root(root) as root_fd:
        fd = _open_dirs(root_fd, parts, create)
    try:
        yield fd
    finally:
        os.close(fd)


def _checked_file(fd: int, shown: str, max_bytes: int | None) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        what = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, socket or device)"
        raise UnsafePathError(f"{shown} is {what}; only regular files can be used here")
    if st.st_nlink > 1:
        raise UnsafePathError(f"{shown} has {st.st_nlink} hard links: {NO_LINKS}; replace it with a copy "
                              f"(cp {shown} {shown}.tmp && mv {shown}.tmp {shown})")
    if max_bytes is not None and st.st_size > max_bytes:
        raise UnsafePathError(f"{shown} is {st.st_size} bytes, more than the {max_bytes} allowed")
    return st


@contextlib.contextmanager
def open_file(root: str | Path, rel: str | PurePosixPath, flags: int = os.O_RDONLY, *,
              make_parents: bool = False, max_bytes: int | None = MAX_FILE_BYTES) -> Iterator[int]:
    """A descriptor of the regular file ``rel`` under ``root``; O_CREAT in ``flags`` creates it.

    O_TRUNC is not allowed: truncate after the checks (``write_bytes`` does), or a hard link to
    a file outside would be emptied before it is refused.
    """
    if flags & os.O_TRUNC:
        raise ValueError("open_file: truncate after opening (ftruncate), not with O_TRUNC")
    parts = parts_of(rel)
    if not parts:
        raise UnsafePathError(f"{rel!s}: a file name is needed, not the workspace itself")
    shown = "/".join(parts)
    with open_dir(root, "/".join(parts[:-1]), create=make_parents) as dir_fd:
        try:  # O_NONBLOCK: opening a FIFO must not hang the evaluator
            fd = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.EISDIR:
                raise UnsafePathError(f"{shown} is a folder; only regular files can be used here") from None
            if exc.errno == errno.ENXIO:  # a FIFO opened for writing without a reader
                raise UnsafePathError(f"{shown} is not a regular file (a FIFO); only regular files can be used "
                                      f"here") from None
            raise _refusal(shown, dir_fd, parts[-1], exc) from None
    try:
        _checked_file(fd, shown, max_bytes)
        os.set_blocking(fd, True)
        yield fd
    finally:
        os.close(fd)


def read_bytes(root: str | Path, rel: str | PurePosixPath, max_bytes: int | None = MAX_FILE_BYTES) -> bytes:
    """The content of the regular file ``rel`` under ``root``, no link followed."""
    with open_file(root, rel, max_bytes=max_bytes) as fd:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            if max_bytes is not None and sum(map(len, chunks)) > max_bytes:  # grew since the check
                raise UnsafePathError(f"{PurePosixPath(rel)} is more than the {max_bytes} bytes allowed")
        return b"".join(chunks)


def read_text(root: str | Path, rel: str | PurePosixPath, max_bytes: int | None = MAX_FILE_BYTES) -> str:
    """``read_bytes`` decoded as UTF-8 (UnicodeDecodeError for a binary file)."""
    return read_bytes(root, rel, max_bytes).decode("utf-8")


def write_bytes(root: str | Path, rel: str | PurePosixPath, data: bytes, *, make_parents: bool = True) -> None:
    """Replace (or create) the regular file ``rel`` under ``root`` in place, keeping its mode."""
    with open_file(root, rel, os.O_WRONLY | os.O_CREAT, make_parents=make_parents, max_bytes=None) as fd:
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]


def lstat(root: str | Path, rel: str | PurePosixPath) -> os.stat_result | None:
    """The status of ``rel`` itself (a link is not followed), None when it does not exist.

    A link among the folders leading to it is refused (UnsafePathError); ``rel`` may be a link.
    """
    parts = parts_of(rel)
    if not parts:
        with open_root(root) as fd:
            return os.fstat(fd)
    try:
        with open_dir(root, "/".join(parts[:-1])) as dir_fd:
            return os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def unlink(root: str | Path, rel: str | PurePosixPath) -> None:
    """Remove the name ``rel`` (a link itself, never its target); a missing name is fine."""
    parts = parts_of(rel)
    with open_dir(root, "/".join(parts[:-1])) as dir_fd, contextlib.suppress(FileNotFoundError):
        os.unlink(parts[-1], dir_fd=dir_fd)


def walk(root: str | Path, rel: str | PurePosixPath = "", skip: frozenset[str] | set[str] = frozenset(),
         max_entries: int | None = None) -> Iterator[Entry]:
    """Every name under ``rel``, depth first in name order; folders named in ``skip`` not entered.

    Links and other non-regular names are reported, never followed; a folder swapped for a link
    while walking is reported as a link. UnsafePathError after ``max_entries`` names or past
    ``MAX_DEPTH`` nested folders.
    """
    base = parts_of(rel)
    counter = [0]
    with open_dir(root, "/".join(base)) as top:
        yield from _walk_fd(top, base, skip, max_entries, counter)


def _walk_fd(fd: int, parts: list[str], skip: frozenset[str] | set[str], max_entries: int | None,
             counter: list[int]) -> Iterator[Entry]:
    if len(parts) > MAX_DEPTH:
        raise UnsafePathError(f"{'/'.join(parts)} is nested deeper than {MAX_DEPTH} folders")
    with os.scandir(fd) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        counter[0] += 1
        if max_entries is not None and counter[0] > max_entries:
            raise UnsafePathError(f"the workspace holds more than {max_entries} files and folders; "
                                  f"remove the extra ones")
        path = [*parts, entry.name]
        try:
            kind = _kind(entry.stat(follow_symlinks=False).st_mode)
        except FileNotFoundError:  # removed since it was listed
            continue
        if kind != "dir" or entry.name in skip:
            yield Entry("/".join(path), kind)
            continue
        try:
            sub = os.open(entry.name, _DIR, dir_fd=fd)
        except OSError as exc:
            if exc.errno not in _LINK_ERRNOS:
                raise
            yield Entry("/".join(path), "link")  # swapped for a link since it was listed
            continue
        try:
            yield Entry("/".join(path), "dir")
            yield from _walk_fd(sub, path, skip, max_entries, counter)
        finally:
            os.close(sub)
