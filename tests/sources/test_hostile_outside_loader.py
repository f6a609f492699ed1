"""Hostile ``.pt`` files that run no code yet reached outside the loader.

Findings of the hostile-pickle pass (tests/sources/test_hostile_pickles.py holds
the code-execution vectors): a tar member that opens a FIFO and would hang the
load, terminal escape sequences and unprintable keys echoed in error messages,
rollout ids past int64 and placeholder arguments too big to show.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest
import torch

from slime_trace_widget import DumpError
from slime_trace_widget.sources.loading import load_dump, load_frames
from tests.support.hostile_pickles import Reduce, benign_sample, hostile_sample


def test_tar_member_symlinked_to_a_fifo_is_never_opened(tmp_path: Path) -> None:
    """torch extracts a tar's ``storages`` member and opens it; as a symlink to a FIFO that
    open never returns. The loader must refuse the tar before torch touches it."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    path = tmp_path / "rollout_1.pt"
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("storages")
        info.type, info.linkname = tarfile.SYMTYPE, str(fifo)
        tar.addfile(info)
    opened = threading.Event()
    done = threading.Event()

    def watch() -> None:
        # A write end opens without blocking only while someone reads: that is the loader.
        while not done.is_set():
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                opened.set()
                return
            except OSError:
                time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with pytest.raises(DumpError, match="tar archive"):
            load_dump(path)
    finally:
        done.set()
        watcher.join()
    assert not opened.is_set()


def test_error_messages_escape_terminal_control_characters(tmp_path: Path) -> None:
    """torch quotes a bad ``byteorder`` record in its error; the DumpError (printed by
    the CLI) must not carry the file's escape sequences to the terminal."""
    path = tmp_path / "rollout_1.pt"
    buffer = io.BytesIO()
    torch.save({"samples": []}, buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as source, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            data = source.read(info.filename)
            evil = "\x1b]0;owned\x07\x1b[2J\x9b31m".encode()
            target.writestr(info.filename, evil if info.filename.endswith("/byteorder") else data)
    with pytest.raises(DumpError) as info:
        load_dump(path)
    message = str(info.value)
    assert message.isprintable() and "\\x1b" in message


def test_keys_of_a_dict_without_samples_are_shown_safely(tmp_path: Path) -> None:
    """The error lists the top-level keys; a 5,000-digit int key made ``repr`` raise."""
    path = tmp_path / "rollout_1.pt"
    torch.save({10**5000: 1, "a\x1bb": 2}, path)
    with pytest.raises(DumpError, match="no 'samples' key") as info:
        load_dump(path)
    assert str(info.value).isprintable() and "bits" in str(info.value)


def test_huge_rollout_ids_fall_back_to_the_file_name(tmp_path: Path) -> None:
    """An id past int64 (in the dict or the file name) broke the Int64 samples column."""
    path = tmp_path / "rollout_3.pt"
    torch.save({"rollout_id": 2**70, "samples": [benign_sample()]}, path)
    assert load_dump(path).rollout_id == 3
    named = tmp_path / f"rollout_{10**30}.pt"
    torch.save([benign_sample()], named)
    assert load_dump(named).rollout_id is None
    assert load_frames(named).samples["rollout_id"].isna().all()


def test_placeholder_repr_stays_short_for_huge_arguments(tmp_path: Path) -> None:
    """A placeholder's repr is built each time it is shown: a 10 MB string argument is
    cut before repr, and a 5,000-digit int (whose repr raises) is summarised."""
    path = tmp_path / "rollout_1.pt"
    payload = Reduce(os.system, "x" * 10_000_000, 10**5000)
    sample = hostile_sample("none")
    sample["trace"]["events"][2]["attrs"] = {"payload": payload}
    torch.save([sample], path)
    (loaded,) = load_dump(path).samples
    text = repr(loaded["trace"]["events"][2]["attrs"]["payload"])
    assert len(text) < 200 and "system" in text
