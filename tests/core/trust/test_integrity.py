"""The cache's HMAC key (private, made once even under concurrent first use) and signed files."""

from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path

import pytest

from kag.core.trust import integrity


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_key_is_0600_in_a_0700_folder_of_this_user(tmp_path: Path) -> None:
    old = os.umask(0)  # the modes must not depend on the umask
    try:
        key = integrity.load_key(tmp_path / "cache")
    finally:
        os.umask(old)
    path = integrity.key_path(tmp_path / "cache")
    assert len(key) == integrity.KEY_BYTES and path.read_bytes() == key
    assert mode(path) == 0o600 and mode(path.parent) == 0o700 and mode(tmp_path / "cache") == 0o755
    assert os.stat(path).st_uid == os.geteuid() and os.stat(path.parent).st_uid == os.geteuid()
    assert integrity.load_key(tmp_path / "cache") == key
    assert os.listdir(path.parent) == [integrity.KEY_FILE], "no temp file left behind"


def _worker(root: str, barrier, queue) -> None:
    barrier.wait()
    queue.put(integrity.load_key(root).hex())


def test_concurrent_first_use_creates_one_key(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    n = 8
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), barrier, queue)) for _ in range(n)]
    for p in procs:
        p.start()
    keys = [queue.get(timeout=60) for _ in range(n)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(set(keys)) == 1 and keys[0] == integrity.key_path(tmp_path).read_bytes().hex()
    assert os.listdir(integrity.key_path(tmp_path).parent) == [integrity.KEY_FILE]


@pytest.mark.parametrize("exposure", ["readable", "symlink", "truncated"])
def test_a_key_others_may_know_is_replaced(tmp_path: Path, exposure: str) -> None:
    old = integrity.load_key(tmp_path)
    path = integrity.key_path(tmp_path)
    if exposure == "readable":
        os.chmod(path, 0o644)
    elif exposure == "symlink":
        planted = tmp_path / "planted.key"
        planted.write_bytes(b"k" * integrity.KEY_BYTES)
        os.chmod(planted, 0o600)
        path.unlink()
        path.symlink_to(planted)
    else:
        path.write_bytes(old[:5])
    new = integrity.load_key(tmp_path)
    assert new != old and new != b"k" * integrity.KEY_BYTES and len(new) == integrity.KEY_BYTES
    assert not path.is_symlink() and mode(path) == 0o600


def test_a_lax_key_folder_is_tightened_and_a_planted_one_refused(tmp_path: Path) -> None:
    integrity.load_key(tmp_path / "a")
    os.chmod(tmp_path / "a" / integrity.KEY_DIR, 0o755)
    integrity.load_key(tmp_path / "a")
    assert mode(tmp_path / "a" / integrity.KEY_DIR) == 0o700
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / integrity.KEY_DIR).symlink_to(tmp_path / "a" / integrity.KEY_DIR)
    with pytest.raises(integrity.IntegrityError, match="not a folder of this user"):
        integrity.load_key(tmp_path / "b")


def test_a_mac_is_bound_to_key_kind_name_and_bytes() -> None:
    key, other = b"k" * 32, b"o" * 32
    mac = integrity.sign(key, "object", "abc.o", b"\x7fELF...")
    assert integrity.verify(key, "object", "abc.o", b"\x7fELF...", mac)
    assert integrity.verify(key, "object", "abc.o", b"\x7fELF...", mac.encode() + b"\n")
    assert not integrity.verify(other, "object", "abc.o", b"\x7fELF...", mac)
    assert not integrity.verify(key, "module", "abc.o", b"\x7fELF...", mac)
    assert not integrity.verify(key, "object", "abd.o", b"\x7fELF...", mac)
    assert not integrity.verify(key, "object", "abc.o", b"\x7fELF....", mac)
    assert not integrity.verify(key, "object", "abc.o", b"\x7fELF...", None)


def test_a_signed_store_returns_only_bytes_that_verify(tmp_path: Path) -> None:
    (tmp_path / "objects").mkdir()
    (tmp_path / "objects" / ".lock").touch()
    os.chmod(tmp_path / "objects", 0o777)  # as an older kag (or a lax umask) left them
    os.chmod(tmp_path / "objects" / ".lock", 0o666)
    old = os.umask(0o002)  # a group-writable umask must not make the cache group-writable
    try:
        store = integrity.SignedStore(tmp_path / "objects", "object", b"k" * 32)
        store.write("a.o", b"genuine")
        store.write("b.o", b"other")
    finally:
        os.umask(old)
    assert mode(tmp_path / "objects") == 0o755
    assert mode(tmp_path / "objects" / "a.o") == 0o644 and mode(tmp_path / "objects" / "a.o.mac") == 0o644
    assert mode(tmp_path / "objects" / ".lock") == 0o600
    assert store.read("a.o") == b"genuine" and store.read("missing.o") is None and store.rejected == []
    (tmp_path / "objects" / "a.o").write_bytes(b"genuine + appended")
    assert store.read("a.o") is None and store.rejected == ["a.o"]
    for suffix in ("", ".mac"):  # a genuine pair moved under another key
        os.replace(tmp_path / "objects" / f"b.o{suffix}", tmp_path / "objects" / f"a.o{suffix}")
    assert store.read("a.o") is None and store.rejected == ["a.o", "a.o"]
    (tmp_path / "objects" / "c.o").write_bytes(b"planted, no MAC")
    assert store.read("c.o") is None and store.rejected[-1] == "c.o"
    store.write("a.o", b"rebuilt")  # a bad entry is replaced; a good one is kept (first writer wins)
    assert store.read("a.o") == b"rebuilt"
    store.write("a.o", b"another build of the same key")
    assert store.read("a.o") == b"rebuilt"
