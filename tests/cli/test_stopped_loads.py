"""A load the command is stopped in leaves nothing behind: SIGKILL, which nothing can
catch, still leaves no helper running.

Each test freezes the job its load's helper runs (``tests/support/stopped_loads.py``),
so that only stopping the caller can end it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stopped_loads import (
    command,
    end_group,
    frozen_job,
    group_outlives,
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


def test_a_killed_command_leaves_no_helper_running(slow_dump: Path, tmp_path: Path,
                                                   caught: list) -> None:
    """SIGKILL runs no handler: the helper sees its caller's end of its stdin close."""
    caller = started(command("view", str(slow_dump), "--no-serve", "--out-dir",
                             str(tmp_path / "out")), tmp_path / "tmp")
    helper = frozen_job(caller)
    caught.append((caller, helper))
    caller.kill()
    caller.wait()
    assert group_outlives(helper) == []
