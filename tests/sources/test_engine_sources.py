"""Engine traces through every way in: ``load_frames`` (worker processes), ``convert`` and
the run dataset, ``from_dataset``, the CLI page; and the store's time-window reads."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slime_trace_widget import TraceTimeline, load_frames
from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.sources.dataset import convert, open_dataset
from slime_trace_widget.sources.engine.beyond import BEYOND_WINDOW, MISSING_WARNING
from slime_trace_widget.sources.engine.store import LAYOUT, SUBDIR, read_spans
from slime_trace_widget.sources.engine.window import MARGIN_SECONDS
from tests.sources.test_engine_join import SKEWS, check_slices, store_requests
from tests.support.engine_traces import Request, requests_for, stray_requests

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[Request]]:
    """A dump, and a collector folder with its requests and some strays, in two files."""
    folder = tmp_path_factory.mktemp("engine_run")
    (folder / "debug").mkdir()
    dump = write_demo_dump(folder / "debug" / "rollout_0.pt", n_samples=12, seed=21)
    frames = load_frames(str(dump), progress=False)
    requests = requests_for(frames, pd=True, hosts=tuple(SKEWS))
    store_requests(requests, folder / "engine", SKEWS)
    store_requests(stray_requests(3, frames.t0, frames.t1), folder / "engine", SKEWS)
    return dump, folder / "engine", requests


def test_load_frames_joins_in_the_caller(run: tuple[Path, Path, list[Request]]) -> None:
    dump, engine, requests = run
    frames = load_frames(str(dump), progress=False, engine_traces=str(engine))
    check_slices(frames, requests)
    assert len(frames.engine_unmatched) == 3
    timeline = TraceTimeline.from_dump(str(dump), engine_traces=engine)
    assert (timeline.frames.span_core["origin"] == "engine").sum() == \
        (frames.span_core["origin"] == "engine").sum()


def test_convert_keeps_engine_spans_and_from_dataset_joins_later(
        run: tuple[Path, Path, list[Request]], tmp_path: Path) -> None:
    dump, shared, requests = run
    engine = shutil.copytree(shared, tmp_path / "engine")  # this test adds to it
    with_engine = tmp_path / "with"
    report = convert([str(dump)], with_engine, engine_traces=engine, settle_seconds=0)
    assert report.converted == [str(dump)]
    opened = open_dataset(with_engine)
    check_slices(opened, requests)
    # the join's reports are kept with the dump
    assert set(opened.engine_skew["host"]) == set(SKEWS)
    assert len(opened.engine_unmatched) == 3
    # a rerun converts again only when the engine traces of the dump's time changed
    assert convert([str(dump)], with_engine, engine_traces=engine,
                   settle_seconds=0).unchanged == [str(dump)]
    assert convert([str(dump)], with_engine, settle_seconds=0).unchanged == [str(dump)]
    store_requests(stray_requests(1, opened.t0, opened.t1, seed=9), engine, SKEWS)
    assert convert([str(dump)], with_engine, engine_traces=engine,
                   settle_seconds=0).converted == [str(dump)]
    assert len(open_dataset(with_engine).engine_unmatched) == 4
    # opening it with the engine traces again attaches nothing twice
    again = TraceTimeline.from_dataset(with_engine, engine_traces=engine).frames
    assert (again.span_core["origin"] == "engine").sum() == \
        (open_dataset(with_engine).span_core["origin"] == "engine").sum()
    without = tmp_path / "without"
    convert([str(dump)], without, settle_seconds=0)
    assert (open_dataset(without).span_core["origin"] == "dump").all()
    check_slices(TraceTimeline.from_dataset(without, engine_traces=engine).frames, requests)


def test_a_file_beyond_the_window_converts_again_when_the_join_searched_there(
        run: tuple[Path, Path, list[Request]], tmp_path: Path) -> None:
    """The first request's two halves reach the store late, from hosts whose clocks are
    two minutes past the rollout's end: beyond the window read around the dump, where its
    join searched since the span waited. The dataset lists them after the next convert.
    A dump whose spans all found their requests never searched: a file out there leaves
    it as it is."""
    dump, shared, requests = run
    frames = load_frames(str(dump), progress=False)
    engine = store_requests(requests[1:], tmp_path / "engine", SKEWS)
    out = tmp_path / "dataset"
    assert convert([str(dump)], out, engine_traces=engine, settle_seconds=0).converted == [
        str(dump)]
    assert open_dataset(out).warnings[MISSING_WARNING] == 1
    assert convert([str(dump)], out, engine_traces=engine,
                   settle_seconds=0).unchanged == [str(dump)]
    ahead = -(frames.t1 - frames.t0) - 2 * MARGIN_SECONDS  # engine time + skew = dump time
    store_requests(requests[:1], engine, dict.fromkeys(SKEWS, ahead))
    assert convert([str(dump)], out, engine_traces=engine,
                   settle_seconds=0).converted == [str(dump)]
    opened = open_dataset(out)
    assert opened.engine_unmatched["reason"].tolist() == [BEYOND_WINDOW] * 2
    assert set(opened.engine_unmatched["rid"]) == {requests[0].rid}
    assert MISSING_WARNING not in opened.warnings
    # nothing waited: a late file beyond the window changes nothing the join read
    found = shutil.copytree(shared, tmp_path / "found")
    assert convert([str(dump)], tmp_path / "complete", engine_traces=found,
                   settle_seconds=0).converted == [str(dump)]
    store_requests(stray_requests(1, frames.t1 + 2 * MARGIN_SECONDS,
                                  frames.t1 + 2 * MARGIN_SECONDS + 1, seed=5), found, SKEWS)
    assert convert([str(dump)], tmp_path / "complete", engine_traces=found,
                   settle_seconds=0).unchanged == [str(dump)]


def test_the_cli_page_draws_engine_spans(run: tuple[Path, Path, list[Request]],
                                         tmp_path: Path) -> None:
    dump, engine, requests = run

    def page(out: Path, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "slime_trace_widget", str(dump),
                               "--no-serve", "--out-dir", str(out), *extra],
                              capture_output=True, text=True, timeout=600, cwd=ROOT)

    def drawn(result: subprocess.CompletedProcess) -> int:
        assert result.returncode == 0, result.stderr
        return int(re.search(r"([0-9]+) spans drawn", result.stdout).group(1))

    plain = drawn(page(tmp_path / "plain"))
    joined = drawn(page(tmp_path / "joined", "--engine-traces", str(engine)))
    attached = sum(1 + len(half.slices) for r in requests for half in r.halves)
    assert joined == plain + attached
    again = page(tmp_path / "joined", "--engine-traces", str(engine))
    assert "reusing" in again.stdout  # nothing changed: the cache stands
    store_requests(stray_requests(1, 0.0, 10.0, seed=5), engine, {})
    assert drawn(page(tmp_path / "joined", "--engine-traces", str(engine))) == joined
    missing = page(tmp_path / "joined", "--engine-traces", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no such engine-trace folder" in missing.stderr


def test_a_window_reads_only_the_files_that_overlap_it(tmp_path: Path) -> None:
    early = stray_requests(4, 1000.0, 1100.0, seed=1)
    late = stray_requests(4, 9000.0, 9100.0, seed=2)
    store_requests(early, tmp_path, {})
    store_requests(late, tmp_path, {})
    files = sorted(f for f in (tmp_path / SUBDIR).iterdir() if LAYOUT.finished.fullmatch(f.name))
    assert len(files) == 2
    for path in (files[1], LAYOUT.companion_of(files[1])):
        path.write_bytes(b"not parquet")  # a file outside the window is never opened
    spans = 4 * 6  # each: a room, a request root, a thread, three slices
    assert len(read_spans(tmp_path, 990 * 10**9, 1200 * 10**9)) == spans
    assert len(read_spans(tmp_path, 990 * 10**9, 1200 * 10**9, folded=True)) == spans
    with pytest.warns(RuntimeWarning, match="skipped engine traces"):
        assert len(read_spans(tmp_path)) == spans
