"""Output files are written whole or not at all (``whole_files``)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from slime_trace_widget.whole_files import TEMPORARY_SUFFIX, replaced, write_whole


def test_text_and_bytes_land_whole_and_leave_nothing_beside(tmp_path: Path) -> None:
    assert write_whole(tmp_path / "page.html", "<p>é</p>") == tmp_path / "page.html"
    write_whole(tmp_path / "cache.bin", b"\x00\x01")
    assert (tmp_path / "page.html").read_bytes() == "<p>é</p>".encode()
    assert (tmp_path / "cache.bin").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.bin", "page.html"]


def test_a_reader_of_the_old_file_keeps_reading_it(tmp_path: Path) -> None:
    target = tmp_path / "manifest.json"
    target.write_text("old")
    with open(target, encoding="utf-8") as reader:
        write_whole(target, "new")
        assert reader.read() == "old"  # replaced by a rename, never rewritten in place
    assert target.read_text() == "new"


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(tmp_path: Path) -> None:
    target = tmp_path / "trace.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), replaced(target) as temporary:
        temporary.write_text("half")
        raise RuntimeError("the exporter failed midway")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]


def test_the_temporary_is_a_dot_file_beside_the_target(tmp_path: Path) -> None:
    # A store's crash recovery removes such leftovers by this very pattern.
    with replaced(tmp_path / "spans.parquet") as temporary:
        assert temporary.parent == tmp_path
        assert temporary.name.startswith(".spans.parquet.")
        assert temporary.name.endswith(TEMPORARY_SUFFIX)
        temporary.write_bytes(b"x")


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_new_file_gets_the_umask_s_permissions(tmp_path: Path, umask: int) -> None:
    previous = os.umask(umask)
    try:
        write_whole(tmp_path / "out.html", "x")
    finally:
        os.umask(previous)
    assert (tmp_path / "out.html").stat().st_mode & 0o777 == 0o666 & ~umask


def test_writers_of_one_target_in_threads_never_mix(tmp_path: Path) -> None:
    target = tmp_path / "status.json"
    payloads = [bytes([65 + n]) * 200_000 for n in range(8)]
    failures: list[BaseException] = []

    def write(payload: bytes) -> None:
        try:
            for _ in range(20):
                write_whole(target, payload)
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(p,)) for p in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not failures
    assert target.read_bytes() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]


def test_durable_syncs_the_file_before_the_rename_and_the_folder_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "engine-1-2-000001.parquet"
    synced: list[tuple[str, bool]] = []
    real_fsync = os.fsync

    def fsync(handle: int) -> None:
        name = os.readlink(f"/proc/self/fd/{handle}")
        synced.append((os.path.basename(name), target.exists()))
        real_fsync(handle)

    if not os.path.exists("/proc/self/fd"):
        pytest.skip("needs /proc to name the synced descriptors")
    monkeypatch.setattr(os, "fsync", fsync)
    write_whole(target, b"rows", durable=True)
    (file_name, existed_then), (folder_name, landed_then) = synced
    assert file_name.endswith(TEMPORARY_SUFFIX) and not existed_then
    assert folder_name == tmp_path.name and landed_then


def test_an_existing_file_keeps_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "private.html"
    target.write_text("old")
    target.chmod(0o600)
    write_whole(target, "new")
    assert target.stat().st_mode & 0o777 == 0o600 and target.read_text() == "new"


def test_a_symbolic_link_is_written_through(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    real = tmp_path / "shared" / "page.html"
    real.write_text("old")
    link = tmp_path / "page.html"
    link.symlink_to(real)
    write_whole(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "shared").iterdir()) == ["page.html"]


@pytest.mark.parametrize("make, error", [
    (lambda target: target.mkdir(), IsADirectoryError),  # a folder where the file goes
    (lambda target: None, FileNotFoundError),  # its folder missing
])
def test_a_write_that_fails_names_the_target_not_its_temporary_file(tmp_path, make, error):
    target = tmp_path / ("missing" if error is FileNotFoundError else "") / "view.html"
    make(target)
    with pytest.raises(error) as raised:
        write_whole(target, "page")
    assert raised.value.filename == str(target)
    assert not list(tmp_path.rglob("*.tmp"))
