"""Integrity of the evaluator's caches: an HMAC key only the evaluator holds, and signed files.

Trusted side. The build cache (objects, linked modules, toolchain facts) and the baseline timings
are reused by every later evaluation on the machine, so anything that can write them can change
every later verdict. Other layers keep untrusted code from writing there (its own uid, Landlock);
this module makes tampering detectable anyway: each cached item carries an HMAC-SHA256 over its
kind, its cache key and its bytes, made with a key kept in ``<cache>/private/`` (folder 0700, key
0600, owned by the evaluator's user). An item whose MAC does not verify is treated as absent and
rebuilt or re-timed by the caller. Cache folders are made 0755 and files 0644 (readable by the
sandboxed builds that read the cache, writable by the evaluator only), always written as a temp
file renamed into place.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import hmac
import os
import stat
import threading
import uuid
from pathlib import Path
from typing import Iterator

KEY_DIR = "private"
KEY_FILE = "hmac-sha256.key"
KEY_BYTES = 32
DIR_MODE = 0o755
FILE_MODE = 0o644
KEY_DIR_MODE = 0o700
KEY_MODE = 0o600
LOCK_MODE = 0o600  # a lock file others could open is a lock they could hold forever
MAC_SUFFIX = ".mac"


class IntegrityError(Exception):
    """The key cannot be kept private here (its folder belongs to another user, or is not a folder)."""


def _unique() -> str:
    return f"{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}"


def ensure_dir(path: Path | str, mode: int = DIR_MODE) -> Path:
    """Create ``path`` (and parents) with ``mode`` whatever the umask; an existing folder of ours
    that others could write is tightened to ``mode``, never loosened.

    A folder another user owns is left as it is: its files are still checked by MAC.
    """
    path = Path(path)
    created = not os.path.lexists(path)
    path.mkdir(parents=True, exist_ok=True)
    st = os.lstat(path)
    current = stat.S_IMODE(st.st_mode)
    if st.st_uid == os.geteuid() and stat.S_ISDIR(st.st_mode) and current != mode \
            and (created or current & 0o022):
        os.chmod(path, mode)
    return path


def atomic_write(path: Path | str, data: bytes, mode: int = FILE_MODE) -> None:
    """Write ``data`` to a temp file with ``mode`` (not the umask's) and rename it into place."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{_unique()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def locked(lock_path: Path | str, exclusive: bool) -> Iterator[None]:
    """An flock on ``lock_path`` (created 0600: nobody else can open it, so nobody else can hold it)."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, LOCK_MODE)
    try:
        if os.fstat(fd).st_uid == os.geteuid():
            os.fchmod(fd, LOCK_MODE)  # a lock file made by an older kag (0644 under the umask)
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# the key
def key_path(root: Path | str) -> Path:
    return Path(root) / KEY_DIR / KEY_FILE


def _key_folder(root: Path) -> Path:
    ensure_dir(root)
    folder = root / KEY_DIR
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, KEY_DIR_MODE)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise IntegrityError(f"{folder} is not a folder of this user (uid {os.geteuid()}): the cache's key "
                             f"cannot be kept private there; point KAG_CACHE_DIR at a folder this user owns")
    if stat.S_IMODE(st.st_mode) != KEY_DIR_MODE:
        os.chmod(folder, KEY_DIR_MODE)
    return folder


def _new_key_file(folder: Path) -> Path:
    """A complete key in a fresh 0600 temp file, so readers never see a partial key."""
    tmp = folder / f".{KEY_FILE}.{_unique()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, KEY_MODE)
    with os.fdopen(fd, "wb") as fh:
        fh.write(os.urandom(KEY_BYTES))
        fh.flush()
        os.fsync(fh.fileno())
    return tmp


def _read_key(path: Path) -> bytes | None:
    """The key if ``path`` is a private regular file of ours with a whole key; None if absent.

    Raises ValueError when it exists but cannot be trusted (a link, another owner, readable by
    others, wrong size): such a key may be known to someone else.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError("a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise ValueError("not a regular file of this user")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise ValueError(f"mode {stat.S_IMODE(st.st_mode):o}, readable or writable by others")
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise ValueError(f"{len(data)} bytes, not {KEY_BYTES}")
    return data


def load_key(root: Path | str) -> bytes:
    """The HMAC key of the cache at ``root``, made on first use.

    Concurrent first use is safe: each process writes a whole key to its own temp file and
    hard-links it to the key's name; the first link wins and every process then reads that one.
    A key that cannot be trusted (see ``_read_key``) is replaced, which invalidates everything
    signed with it: the caches are rebuilt rather than believed.
    """
    folder = _key_folder(Path(root))
    path = folder / KEY_FILE
    for _ in range(5):
        try:
            key = _read_key(path)
        except ValueError:
            os.replace(_new_key_file(folder), path)
            continue
        if key is not None:
            return key
        tmp = _new_key_file(folder)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: read theirs
        except OSError:  # no hard links on this filesystem: a rename cannot lose a race badly
            if not path.exists():
                os.rename(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    raise IntegrityError(f"{path}: could not create or read the cache's key")


# ---------------------------------------------------------------------------------------------
# MACs
def sign(key: bytes, kind: str, name: str, data: bytes) -> str:
    """HMAC-SHA256 (hex) of ``data`` bound to its kind and cache key: moving signed bytes to
    another key, or another kind of item, breaks the MAC."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in (kind.encode(), name.encode(), data):
        mac.update(len(part).to_bytes(8, "little"))
        mac.update(part)
    return mac.hexdigest()


def verify(key: bytes, kind: str, name: str, data: bytes, mac: str | bytes | None) -> bool:
    if isinstance(mac, bytes):
        mac = mac.decode("ascii", "replace")
    if not isinstance(mac, str):
        return False
    return hmac.compare_digest(sign(key, kind, name, data), mac.strip())


class SignedStore:
    """A cache folder whose every file ``NAME`` has its MAC in ``NAME.mac`` beside it.

    ``read`` gives the bytes only if they verify (and records the name in ``rejected`` when a file
    is there but does not); ``write`` publishes a file and its MAC together under the folder's
    lock, keeping an entry already there that verifies (first writer wins, so concurrent builds
    of the same key agree). Callers use the bytes ``read`` returned, never the path again, so a
    file swapped after the check is never used.
    """

    def __init__(self, folder: Path | str, kind: str, key: bytes):
        self.folder = ensure_dir(folder)
        self.kind = kind
        self.key = key
        self.lock = self.folder / ".lock"
        self.rejected: list[str] = []

    def path(self, name: str) -> Path:
        return self.folder / name

    def _load(self, name: str) -> tuple[bytes, bytes | None] | None:
        """(bytes, MAC or None when it is missing), None when there is no such file."""
        try:
            data = self.path(name).read_bytes()
        except FileNotFoundError:
            return None
        try:
            return data, self.path(name + MAC_SUFFIX).read_bytes()
        except FileNotFoundError:
            return data, None

    def read(self, name: str) -> bytes | None:
        try:
            with locked(self.lock, exclusive=False):
                found = self._load(name)
        except OSError as exc:  # a read-only mount (a docker evaluation's cache): no writer to wait for
            if exc.errno not in (errno.EROFS, errno.EACCES):
                raise
            found = self._load(name)
        if found is None:
            return None
        data, mac = found
        if verify(self.key, self.kind, name, data, mac):
            return data
        self.rejected.append(name)
        return None

    def write(self, name: str, data: bytes) -> bytes:
        """Publish ``data`` as ``name``; returns the bytes now cached (an earlier valid entry wins)."""
        with locked(self.lock, exclusive=True):
            found = self._load(name)
            if found is not None and verify(self.key, self.kind, name, *found):
                return found[0]
            atomic_write(self.path(name), data)
            atomic_write(self.path(name + MAC_SUFFIX), sign(self.key, self.kind, name, data).encode())
        return data
