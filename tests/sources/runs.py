"""A small run folder shared by the dataset and run-view tests: three fixture dumps
named as slime names them, dated an hour back so conversion takes them as complete."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

FIXTURES = Path(__file__).parents[1] / "fixtures"
#: file name in the run -> fixture; rollout_7 holds rollout id 3 like the eval dump.
RUN = {"rollout_0.pt": "small.pt", "rollout_eval_3.pt": "rollout_eval_3.pt",
       "rollout_7.pt": "legacy_v1_pd.pt"}


def settle(*paths: Path) -> None:
    """Date ``paths`` an hour back: older than any settle window."""
    old = time.time() - 3600
    for path in paths:
        os.utime(path, (old, old))


def copy_run(parent: Path) -> Path:
    """``parent/debug`` holding the run's dumps, settled."""
    folder = parent / "debug"
    folder.mkdir()
    for name, fixture in RUN.items():
        shutil.copy(FIXTURES / fixture, folder / name)
    settle(*folder.iterdir())
    return folder
