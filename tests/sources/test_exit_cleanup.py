"""A process that exits while a load runs on one of its daemon threads (a notebook's
followed folder, say) ends that load's helper and removes its scratch folder: Python
stops such a thread where it stands, so the load's own ``finally`` never runs."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.stopped_loads import (
    end_group,
    ended,
    frozen_job,
    group_outlives,
    scratch_folders,
    started,
    write_slow_dump,
)

#: Loads the dump ``argv[1]`` on a daemon thread, and exits once told on stdin.
LOAD_ON_A_DAEMON_THREAD = """
import sys, threading
from slime_trace_widget.sources.loading import load_frames
threading.Thread(target=load_frames, args=(sys.argv[1],), kwargs={"progress": False},
                 daemon=True).start()
sys.stdin.readline()
"""


def test_exiting_ends_a_load_on_a_daemon_thread(tmp_path: Path) -> None:
    dump = write_slow_dump(tmp_path / "rollout_0.pt")
    scratch_root = tmp_path / "tmp"
    caller = started([sys.executable, "-c", LOAD_ON_A_DAEMON_THREAD, str(dump)], scratch_root)
    helper = None
    try:
        helper = frozen_job(caller)
        assert scratch_folders(scratch_root)
        caller.stdin.write("exit\n")
        caller.stdin.flush()
        code, err = ended(caller)
        assert code == 0 and err == ""
        assert group_outlives(helper) == []
        assert scratch_folders(scratch_root) == []
    finally:
        if caller.poll() is None:
            caller.kill()
        caller.communicate()
        if helper is not None:
            end_group(helper)
