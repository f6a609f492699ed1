"""Perfetto JSON checked against the trace event format; Parquet read back with DuckDB."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import duckdb
import pytest

from slime_trace_widget.answers.links import links
from slime_trace_widget.export.parquet import to_parquet
from slime_trace_widget.export.perfetto import export_perfetto
from slime_trace_widget.frames import build_frames
from slime_trace_widget.sources.loading import load_frames
from tests.support.perfetto_import import bound_flows, link_slices

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(scope="module")
def frames():
    return load_frames([FIXTURES / "small.pt", FIXTURES / "legacy_v1_pd.pt",
                        FIXTURES / "edge_open_span.pt"])


@pytest.fixture(scope="module")
def trace(frames, tmp_path_factory):
    path = export_perfetto(frames, tmp_path_factory.mktemp("perfetto") / "t.json")
    return json.loads(path.read_text())


def test_required_fields_per_phase(trace) -> None:
    events = trace["traceEvents"]
    assert {e["ph"] for e in events} == {"M", "X", "i"}  # links: bind_id on X events
    for event in events:
        assert {"ph", "name", "pid", "tid"} <= set(event)
        if event["ph"] == "X":
            assert isinstance(event["ts"], int) and isinstance(event["dur"], int)
            assert event["dur"] >= 0 and event["ts"] >= 0
            if "bind_id" in event:
                assert isinstance(event["bind_id"], int) and event["bind_id"] > 0
                assert {key for key in ("flow_in", "flow_out") if event.get(key) is True}
        if event["ph"] == "i":
            assert event["s"] == "t" and event["ts"] >= 0
        if event["ph"] == "M":
            key = "sort_index" if event["name"].endswith("sort_index") else "name"
            assert key in event["args"]


def test_units_are_microseconds_from_dump_start(frames, trace) -> None:
    spans = frames.span_core[~frames.span_core["virtual"]]
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "span"]
    assert len(complete) == len(spans) + int((frames.span_core["pd_form"] == "attrs").sum())
    first = spans.sort_values("start").iloc[0]
    match = next(e for e in complete if e["args"]["slime.span_id"] == first["span_id"])
    assert match["ts"] == pytest.approx((first["start"] - frames.t0) * 1e6, abs=1)
    assert match["dur"] == pytest.approx((first["display_end"] - first["start"]) * 1e6, abs=1)
    assert {e["args"]["slime.state"] for e in complete} == {"closed", "open"}


def test_every_link_binds_to_its_own_two_slices(frames, trace) -> None:
    """Read as Perfetto's importer reads it, each link draws one arrow between the
    slices it joins: no child that starts with a span takes its flow, none is lost."""
    wanted = link_slices(frames, trace)
    assert len(wanted) == len(links(frames)) == 19
    assert sorted(map(sorted, bound_flows(trace))) == sorted(map(sorted, wanted))


def test_every_thread_is_named_and_complete_events_nest(trace) -> None:
    named = {(e["pid"], e["tid"]) for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    by_thread = defaultdict(list)
    for event in trace["traceEvents"]:
        if event["ph"] in "Xi":
            assert (event["pid"], event["tid"]) in named
        if event["ph"] == "X":
            start = event["ts"]
            by_thread[(event["pid"], event["tid"])].append((start, start + event["dur"]))
    processes = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    assert processes == {"rollout 0", "rollout 3", "rollout 9"}
    for intervals in by_thread.values():
        stack: list[float] = []
        for start, end in sorted(intervals, key=lambda se: (se[0], -se[1])):
            while stack and stack[-1] <= start + 1e-6:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-6, "partial overlap on one thread"
            stack.append(end)


def test_parquet_read_back_with_duckdb(frames, tmp_path: Path) -> None:
    root = to_parquet(frames, tmp_path / "pq")
    spans = f"read_parquet('{root}/spans/*/*.parquet', hive_partitioning=true)"
    samples = f"read_parquet('{root}/samples/*/*.parquet', hive_partitioning=true)"
    rows = duckdb.sql(f"select rollout_id, count(*), sum(coalesce(duration, 0)) from {spans} "
                      "group by 1 order by 1").fetchall()
    expected = frames.spans.assign(rollout=frames.samples.loc[
        frames.spans["sample_row"], "rollout_id"].to_numpy()).groupby("rollout")
    assert [r[0] for r in rows] == [0, 3, 9]
    for rollout_id, count, total in rows:
        group = expected.get_group(rollout_id)
        assert count == len(group)
        assert total == pytest.approx(group["duration"].fillna(0).sum())
    joined = duckdb.sql(
        f"select s.status, count(*) from {spans} p join {samples} s "
        "on p.rollout_id = s.rollout_id and p.sample_row = s.row group by 1 order by 1"
    ).fetchall()
    assert sum(c for _, c in joined) == len(frames.spans)
    attrs = duckdb.sql(f"select start_attrs from {spans} where start_attrs is not null "
                       "limit 1").fetchall()[0][0]
    assert isinstance(json.loads(attrs), dict)
    finish = duckdb.sql(f"select count(*) from {spans} where \"attr.finish_reason\" = 'length'"
                        ).fetchall()[0][0]
    assert finish == int((frames.spans["attr.finish_reason"] == "length").sum())


def test_parquet_takes_text_with_lone_surrogates(tmp_path: Path) -> None:
    """Pickled strings may hold lone surrogates, which Arrow refuses: the export used to
    stop with a UnicodeEncodeError. They come out as U+FFFD."""
    records = [
        {"type": "span_start", "name": "n\ud800", "ts": 1.0, "span_id": "a", "trace_id": "t",
         "attempt": 0, "attrs": {"k\ud800": "v\udc00", "nested": {"q": ["\udc01"]}}},
        {"type": "span_end", "name": "n\ud800", "ts": 2.0, "span_id": "a", "trace_id": "t",
         "attempt": 0},
        {"type": "event", "name": "e", "ts": 1.5, "trace_id": "t", "attempt": 0,
         "attrs": {"z": "\ud800"}}]
    sample = {"index": 0, "rollout_id": 3, "label": "bad\ud800",
              "trace": {"trace_id": "t", "events": records}}
    out = to_parquet(build_frames([sample]), tmp_path / "pq")
    spans = duckdb.sql(f"select * from read_parquet('{out}/spans/*/*.parquet')").df()
    assert spans.loc[0, "name"] == "n\ufffd" and spans.loc[0, "attr.k\ufffd"] == "v\ufffd"
    assert json.loads(spans.loc[0, "attr.nested"]) == {"q": ["\ufffd"]}
    events = duckdb.sql(f"select * from read_parquet('{out}/events/*/*.parquet')").df()
    assert events.loc[0, "attr.z"] == "\ufffd"
    samples = duckdb.sql(f"select * from read_parquet('{out}/samples/*/*.parquet')").df()
    assert samples.loc[0, "label"] == "bad\ufffd"
