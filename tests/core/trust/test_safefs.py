"""safefs: the trusted side reads and writes an agent's folder without ever following a link."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from kag.core.trust import safefs
from kag.core.trust.safefs import UnsafePathError

SECRET = "host secret 4f1c"


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A folder outside the workspace that an attack points at."""
    folder = tmp_path / "host"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    return folder


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "a.cu").write_text("// a\n")
    return root


def test_a_link_to_a_host_file_is_refused_by_name(ws: Path, host: Path):
    (ws / "kernels" / "x.cu").symlink_to(host / "secret.txt")
    with pytest.raises(UnsafePathError, match=r"^kernels/x.cu is a symbolic link: links are not allowed") as err:
        safefs.read_bytes(ws, "kernels/x.cu")
    assert SECRET not in str(err.value)
    with pytest.raises(UnsafePathError, match="kernels/x.cu is a symbolic link"):
        safefs.write_bytes(ws, "kernels/x.cu", b"overwritten")
    assert (host / "secret.txt").read_text() == SECRET


def test_a_folder_link_on_the_way_is_refused_for_reads_writes_and_creates(ws: Path, host: Path):
    (ws / "out").symlink_to(host)
    for action in (lambda: safefs.read_bytes(ws, "out/secret.txt"),
                   lambda: safefs.write_bytes(ws, "out/new.txt", b"x"),
                   lambda: safefs.write_bytes(ws, "out/deeper/new.txt", b"x"),
                   lambda: safefs.lstat(ws, "out/secret.txt")):
        with pytest.raises(UnsafePathError, match="^out is a symbolic link: links are not allowed"):
            action()
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt"]


def test_a_dangling_link_is_not_created_through(ws: Path, tmp_path: Path):
    (ws / "kernels" / "b.cu").symlink_to(tmp_path / "planted.txt")
    with pytest.raises(UnsafePathError, match="kernels/b.cu is a symbolic link"):
        safefs.write_bytes(ws, "kernels/b.cu", b"x")
    assert not (tmp_path / "planted.txt").exists()


def test_paths_leaving_the_folder_are_refused(ws: Path):
    for rel in ("../ws/kernels/a.cu", "/etc/passwd", "kernels/../../x"):
        with pytest.raises(UnsafePathError, match="inside the workspace"):
            safefs.read_bytes(ws, rel)


def test_a_fifo_is_refused_at_once_instead_of_hanging(ws: Path):
    os.mkfifo(ws / "kernels" / "pipe.cu")
    start = time.monotonic()
    with pytest.raises(UnsafePathError, match="kernels/pipe.cu is not a regular file"):
        safefs.read_bytes(ws, "kernels/pipe.cu")
    with pytest.raises(UnsafePathError, match="kernels/pipe.cu is not a regular file"):
        safefs.write_bytes(ws, "kernels/pipe.cu", b"x")
    assert time.monotonic() - start < 5


def test_a_hard_link_to_a_host_file_is_neither_read_nor_emptied(ws: Path, host: Path):
    os.link(host / "secret.txt", ws / "kernels" / "h.cu")
    with pytest.raises(UnsafePathError, match="kernels/h.cu has 2 hard links"):
        safefs.read_bytes(ws, "kernels/h.cu")
    with pytest.raises(UnsafePathError, match="kernels/h.cu has 2 hard links"):
        safefs.write_bytes(ws, "kernels/h.cu", b"")
    assert (host / "secret.txt").read_text() == SECRET


def test_walk_reports_links_without_entering_them(ws: Path, host: Path):
    (ws / "kernels" / "x.cu").symlink_to(host / "secret.txt")
    (ws / "linked").symlink_to(host)
    (ws / ".kag").mkdir()
    (ws / ".kag" / "skipped.txt").write_text("")
    entries = {e.rel: e.kind for e in safefs.walk(ws, skip={".kag"})}
    assert entries == {".kag": "dir", "kernels": "dir", "kernels/a.cu": "file", "kernels/x.cu": "link",
                       "linked": "link"}
    with pytest.raises(UnsafePathError, match="more than 2"):
        list(safefs.walk(ws, max_entries=2))


def test_writes_create_folders_and_keep_the_file_mode(ws: Path):
    safefs.write_bytes(ws, "kernels/sub/new.cu", b"// new\n")
    assert (ws / "kernels" / "sub" / "new.cu").read_bytes() == b"// new\n"
    (ws / "kernels" / "a.cu").chmod(0o666)
    safefs.write_bytes(ws, "kernels/a.cu", b"// shorter")
    assert (ws / "kernels" / "a.cu").read_text() == "// shorter"
    assert (ws / "kernels" / "a.cu").stat().st_mode & 0o777 == 0o666


def test_swapping_a_folder_for_a_link_while_reading_never_leaks_the_host_file(ws: Path, host: Path):
    """The race a check-then-open loses: a process of the agent flips kernels/ to a link and back."""
    (host / "a.cu").write_text(SECRET)
    (ws / "kernels_link").symlink_to(host)
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            os.rename(ws / "kernels", ws / "kernels_real")
            os.rename(ws / "kernels_link", ws / "kernels")
            os.rename(ws / "kernels", ws / "kernels_link")
            os.rename(ws / "kernels_real", ws / "kernels")

    flipper = threading.Thread(target=flip)
    flipper.start()
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                seen.add(safefs.read_text(ws, "kernels/a.cu"))
            except UnsafePathError as exc:
                assert "kernels is a symbolic link" in str(exc)
                seen.add("refused")
            except FileNotFoundError:
                pass
    finally:
        stop.set()
        flipper.join()
    assert SECRET not in seen
    assert "// a\n" in seen  # the race ran both ways: real reads happened and links were refused
    assert "refused" in seen
