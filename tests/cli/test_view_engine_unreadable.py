"""slime-trace-viewer DUMP --engine-traces DIR with damaged store files among whole ones:
each is named once, in one line, counted in the load warnings, and the page is not
cached, so the next run says it again."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget import load_frames
from slime_trace_widget.cli.cache import CACHE_SUFFIX
from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.sources.engine.load_store import SUBDIR as LOAD_SUBDIR
from slime_trace_widget.sources.engine.load_store import LoadStore
from slime_trace_widget.sources.engine.store import SUBDIR as SPANS_SUBDIR
from tests.cli.test_view_cache_engine import store_scrapes
from tests.sources.runs import settle
from tests.sources.test_engine_join import SKEWS, store_requests
from tests.support.engine_traces import requests_for


@dataclass(frozen=True)
class Damaged:
    """A rollout's dump and its collector folder, whose span and load stores each hold
    a whole finished file and a ``damaged`` one named as the store names its files."""

    dump: Path
    collected: Path
    damaged: tuple[Path, Path]


def damaged_collector(tmp_path_factory: pytest.TempPathFactory) -> Damaged:
    """A :class:`Damaged` rollout and collector folder, new."""
    dump = write_demo_dump(tmp_path_factory.mktemp("rollout") / "rollout_0.pt",
                           n_samples=8, seed=21)
    settle(dump)
    frames = load_frames(str(dump), progress=False)
    collected = tmp_path_factory.mktemp("engine") / "collect"
    store_requests(requests_for(frames, pd=True, hosts=tuple(SKEWS)), collected, SKEWS)
    load = LoadStore(collected)
    store_scrapes(load, np.linspace(frames.t0, frames.t1, 5))
    load.close()  # its write-ahead file rolled into a finished one
    broken = []
    for subdir in (SPANS_SUBDIR, LOAD_SUBDIR):
        [whole] = (collected / subdir).glob("*.parquet")
        prefix, first, last, _seq = whole.stem.split("-")
        copy = whole.with_name(f"{prefix}-{first}-{last}-999999.parquet")
        copy.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])  # a copy cut short
        broken.append(copy)
    return Damaged(dump, collected, (broken[0], broken[1]))


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Damaged:
    return damaged_collector(tmp_path_factory)


def test_each_damaged_file_is_named_once_counted_and_not_cached(damaged: Damaged,
                                                                tmp_path: Path) -> None:
    """Before: a two-line RuntimeWarning per damaged file (the warning and the source
    line that read it), no count in the load warnings, the cache kept, and the next run
    silent about them."""
    for _run in range(2):
        result = subprocess.run(
            [sys.executable, "-m", "slime_trace_widget", str(damaged.dump), "--no-serve",
             "--out-dir", str(tmp_path), "--engine-traces", str(damaged.collected)],
            capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 2, result.stderr
        for path in damaged.damaged:
            [line] = [line for line in lines if str(path) in line]
            assert line.startswith(f"slime-trace-viewer: skipped engine traces {path}: ")
        assert "load warnings (2): engine_file_unreadable=2" in result.stdout
        assert "no cache kept" in result.stdout and "reusing" not in result.stdout
        assert not list(tmp_path.glob(f"*{CACHE_SUFFIX}"))
