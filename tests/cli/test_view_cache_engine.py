"""slime-trace-viewer DUMP --engine-traces DIR: the cached page of a collector folder that
is still collecting. The page is rebuilt when a file the engine join reads changes (a
span or load file added, one rewritten, a write-ahead file appended) and reused when
only what the view never reads changes: the live records in ``DIR/live`` and the
scraper's status file."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget import load_frames
from slime_trace_widget.cli import main
from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.sources.engine.load_store import LoadStore, scrape_table
from slime_trace_widget.sources.engine.prometheus import Exposition
from slime_trace_widget.sources.engine.scrape import STATUS_FILE, Scraper, parse_target
from slime_trace_widget.sources.engine.store import SUBDIR as SPANS_SUBDIR
from slime_trace_widget.sources.live.collector import LiveCollector
from tests.sources.runs import settle
from tests.sources.test_engine_join import SKEWS, store_requests
from tests.support.engine_traces import Request, requests_for

#: The engine the collector scrapes, as ``collect --scrape NAME=URL`` names it.
TARGET = parse_target("engine-a=http://127.0.0.1:30000/metrics")


@dataclass(frozen=True)
class Recorded:
    """A rollout's dump (dated an hour back), the requests its engines traced, and its
    time (epoch seconds)."""

    dump: Path
    requests: list[Request]
    t0: float
    t1: float


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    dump = write_demo_dump(tmp_path_factory.mktemp("rollout") / "rollout_0.pt",
                           n_samples=8, seed=21)
    settle(dump)
    frames = load_frames(str(dump), progress=False)
    requests = requests_for(frames, pd=True, hosts=tuple(SKEWS))
    return Recorded(dump, requests, frames.t0, frames.t1)


@pytest.fixture
def collected(tmp_path: Path, recorded: Recorded) -> Path:
    """A collector folder as ``collect --scrape`` leaves it mid-run: the span store with
    the first half of the rollout's requests, the load store with scrapes of its time,
    live records in ``live/`` and the scraper's status file."""
    folder = tmp_path / "collect"
    store_requests(recorded.requests[: len(recorded.requests) // 2], folder, SKEWS)
    store_scrapes(LoadStore(folder), np.linspace(recorded.t0, recorded.t1, 5))
    LiveCollector(folder).close()  # a receiver's start and stop rows
    write_status(folder, scrapes=5)
    return folder


def store_scrapes(store: LoadStore, times: np.ndarray) -> None:
    """A scrape of :data:`TARGET` at each of ``times`` appended to ``store``, as the
    scraper writes them."""
    for ts in times:
        scrape = Exposition(["sglang:num_running_reqs"], [""], ["gauge"], [float(ts % 7)])
        store.append(scrape_table(TARGET.name, scrape, round(ts * 1e9)))


def write_status(folder: Path, scrapes: int) -> None:
    """The scraper's status file, rewritten as a running collector does, ``scrapes``
    counted; dated a second past the one it replaces, so the rewrite shows in its mtime
    whatever the file system's resolution."""
    path = folder / STATUS_FILE
    before = path.stat().st_mtime_ns if path.exists() else None
    scraper = Scraper(folder, [TARGET])
    scraper.stats[TARGET.name].scrapes = scrapes
    scraper.write_status()
    if before is not None:
        os.utime(path, ns=(before + 10**9, before + 10**9))


def view(recorded: Recorded, collected: Path, capsys: pytest.CaptureFixture[str]) -> int | None:
    """One ``slime-trace-viewer DUMP --engine-traces DIR`` run: the spans drawn when it
    built the page, None when it reused the cached one."""
    capsys.readouterr()
    assert main([str(recorded.dump), "--no-serve", "--out-dir", str(collected.parent),
                 "--engine-traces", str(collected)]) == 0
    out = capsys.readouterr().out
    if "reusing" in out:
        return None
    built = re.search(r"built .* ([0-9]+) spans drawn", out)
    assert built is not None, out
    return int(built.group(1))


def touch_a_span_file(recorded: Recorded, collected: Path) -> None:
    """A finished span file rewritten in place (dated a second later)."""
    path = next((collected / SPANS_SUBDIR).glob("spans-*.parquet"))
    later = path.stat().st_mtime_ns + 10**9
    os.utime(path, ns=(later, later))


def add_a_span_file(recorded: Recorded, collected: Path) -> None:
    """The other half of the rollout's requests, rolled into a new span file."""
    store_requests(recorded.requests[len(recorded.requests) // 2:], collected, SKEWS)


def add_a_load_file(recorded: Recorded, collected: Path) -> None:
    """More scrapes of the rollout's time, rolled into a new load file."""
    store = LoadStore(collected)
    store_scrapes(store, np.linspace(recorded.t0, recorded.t1, 3) + 0.5)
    store.close()


@pytest.mark.parametrize("change", ["live records", "scrape status"])
def test_what_the_join_never_reads_leaves_the_cached_page_standing(
        recorded: Recorded, collected: Path, change: str, capsys) -> None:
    assert view(recorded, collected, capsys) is not None
    if change == "live records":
        LiveCollector(collected).close()  # another receiver's start and stop rows
    else:
        write_status(collected, scrapes=6)
    assert view(recorded, collected, capsys) is None


@pytest.mark.parametrize("change", [add_a_span_file, add_a_load_file, touch_a_span_file],
                         ids=["a new span file", "a new load file", "a span file rewritten"])
def test_a_store_file_the_join_reads_rebuilds_the_page(
        recorded: Recorded, collected: Path, change: Callable[[Recorded, Path], None],
        capsys) -> None:
    drawn = view(recorded, collected, capsys)
    assert drawn is not None
    change(recorded, collected)
    again = view(recorded, collected, capsys)
    assert again is not None
    if change is add_a_span_file:
        assert again > drawn  # the new requests joined under their spans
    assert view(recorded, collected, capsys) is None


@pytest.fixture
def scraping(collected: Path) -> Iterator[LoadStore]:
    """The load store of ``collected`` held open, as a running collector's scraper holds
    it: its write-ahead file grows with each scrape."""
    store = LoadStore(collected)
    yield store
    store.close()


def test_a_write_ahead_file_a_running_collector_appends_to_rebuilds_the_page(
        recorded: Recorded, collected: Path, scraping: LoadStore, capsys) -> None:
    store_scrapes(scraping, np.array([recorded.t0 + 0.25]))
    assert view(recorded, collected, capsys) is not None
    assert view(recorded, collected, capsys) is None
    store_scrapes(scraping, np.array([recorded.t1 - 0.25]))
    assert view(recorded, collected, capsys) is not None
