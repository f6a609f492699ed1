"""A load the command is stopped in leaves nothing behind: no helper process, no
scratch folder. SIGTERM and SIGHUP stop ``view`` as Ctrl-C does (exit code 128 plus
the signal's number); SIGKILL, which nothing can catch, still leaves no helper running;
Ctrl-C while ``view --follow`` or ``live --dumps`` loads a dump on its poller's thread
ends that load's helper and removes its scratch folder as the process exits.

Each test freezes the job its load's helper runs (``tests/support/stopped_loads.py``),
so that only stopping the caller can end it."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.browser import free_port
from tests.support.stopped_loads import (
    command,
    end_group,
    ended,
    frozen_job,
    group_outlives,
    scratch_folders,
    serving_line,
    started,
    write_slow_dump,
)


@pytest.fixture(scope="module")
def slow_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_slow_dump(tmp_path_factory.mktemp("slow") / "rollout_0.pt")


@pytest.fixture
def caught() -> Iterator[list[tuple[subprocess.Popen, int]]]:
    """(caller, helper) pairs a test caught: whatever is left of them is killed after."""
    pairs: list[tuple[subprocess.Popen, int]] = []
    yield pairs
    for caller, helper in pairs:
        if caller.poll() is None:
            caller.kill()
        caller.communicate()
        end_group(helper)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_a_load_as_ctrl_c_does(slow_dump: Path, tmp_path: Path,
                                              signum: signal.Signals, caught: list) -> None:
    scratch_root = tmp_path / "tmp"
    caller = started(command("view", str(slow_dump), "--no-serve", "--out-dir",
                             str(tmp_path / "out")), scratch_root)
    helper = frozen_job(caller)
    caught.append((caller, helper))
    assert scratch_folders(scratch_root)  # the load is under way
    caller.send_signal(signum)
    code, err = ended(caller)
    assert code == 128 + signum, err
    assert group_outlives(helper) == []
    assert scratch_folders(scratch_root) == []
    assert "Traceback" not in err


def test_a_killed_command_leaves_no_helper_running(slow_dump: Path, tmp_path: Path,
                                                   caught: list) -> None:
    """SIGKILL runs no handler: the helper sees that nothing reads its answers any more."""
    caller = started(command("view", str(slow_dump), "--no-serve", "--out-dir",
                             str(tmp_path / "out")), tmp_path / "tmp")
    helper = frozen_job(caller)
    caught.append((caller, helper))
    caller.kill()
    caller.wait()
    assert group_outlives(helper) == []


def test_ctrl_c_while_following_ends_the_load_on_the_pollers_thread(
        slow_dump: Path, tmp_path: Path, caught: list) -> None:
    folder, scratch_root = tmp_path / "run", tmp_path / "tmp"
    folder.mkdir()
    caller = started(command("view", "--follow", str(folder), "--interval", "0.1", "--port",
                             str(free_port()), "--out-dir", str(tmp_path / "out")),
                     scratch_root)
    serving_line(caller)  # the first look found nothing: the next loads on the poller's thread
    os.link(slow_dump, folder / slow_dump.name)
    ctrl_c_ends_the_load(caller, scratch_root, caught)


def test_ctrl_c_during_a_live_hand_over_ends_its_load(slow_dump: Path, tmp_path: Path,
                                                      caught: list) -> None:
    collector, dumps, scratch_root = tmp_path / "collect", tmp_path / "dumps", tmp_path / "tmp"
    collector.mkdir()
    dumps.mkdir()
    caller = started(command("live", str(collector), "--dumps", str(dumps), "--port",
                             str(free_port())), scratch_root)
    serving_line(caller)  # the dumps there now are earlier steps': only a new one loads
    os.link(slow_dump, dumps / slow_dump.name)
    ctrl_c_ends_the_load(caller, scratch_root, caught)


def ctrl_c_ends_the_load(caller: subprocess.Popen, scratch_root: Path, caught: list) -> None:
    """Ctrl-C to a server whose load runs on a thread of its own, once that load's job
    is frozen: the server stops cleanly, and neither the job nor its folder outlive it."""
    helper = frozen_job(caller)
    caught.append((caller, helper))
    caller.send_signal(signal.SIGINT)
    code, err = ended(caller)
    assert code == 0, err
    assert group_outlives(helper) == []
    assert scratch_folders(scratch_root) == []
    assert "Traceback" not in err
