"""``frames.engine_load`` and its named tracks: the rules of ``load_tracks`` (candidates by
version, priority breakdowns, ranks counted once, counters as rates), the label text,
alignment with the engine hosts' skews, and combining dumps."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from slime_trace_widget.frames.engine_load import (
    ENGINE_LOAD_COLUMNS,
    TRACK_COLUMNS,
    TRACK_NAMES,
    aligned,
    canonical_labels,
    combine_engine_load,
    empty_engine_load,
    engine_load_frame,
    load_tracks,
    parse_labels,
)
from slime_trace_widget.frames.model import TraceFrames

BASE = {"model_name": "m", "engine_type": "unified", "moe_ep_rank": "0", "pp_rank": "0"}


def rows(*samples: tuple[str, str, dict[str, str], float, float]) -> pd.DataFrame:
    """An engine_load table from (engine, metric, labels, ts, value) samples."""
    return engine_load_frame([s[0] for s in samples], [s[1] for s in samples],
                             [canonical_labels(s[2]) for s in samples],
                             [s[3] for s in samples], [s[4] for s in samples])


def track(tracks: pd.DataFrame, engine: str, name: str) -> list[tuple[float, float]]:
    chosen = tracks[(tracks["engine"] == engine) & (tracks["track"] == name)]
    return list(zip(chosen["ts"].tolist(), chosen["value"].tolist(), strict=True))


def test_label_text_is_canonical_and_reads_back() -> None:
    labels = {"b": 'quote " slash \\ line\nend', "a": "", "model_name": "Qwen/Qwen3"}
    text = canonical_labels(labels)
    assert text == 'a="",b="quote \\" slash \\\\ line\\nend",model_name="Qwen/Qwen3"'
    assert parse_labels(text) == labels
    assert canonical_labels(dict(reversed(list(labels.items())))) == text
    assert parse_labels("") == {}
    for bad in ('a="\\q"', 'a=1', 'a="1"b="2"', '="1"'):
        with pytest.raises(ValueError):
            parse_labels(bad)


def test_empty_tables_have_their_columns() -> None:
    empty = empty_engine_load()
    assert tuple(empty.columns) == ENGINE_LOAD_COLUMNS
    assert [str(t) for t in empty.dtypes] == ["category", "category", "category", "float64",
                                              "float64"]
    assert TraceFrames.__dataclass_fields__["engine_load"].default_factory().columns.tolist() \
        == list(ENGINE_LOAD_COLUMNS)
    tracks = load_tracks(empty)
    assert tuple(tracks.columns) == TRACK_COLUMNS and tracks.empty
    assert list(tracks["track"].cat.categories) == list(TRACK_NAMES)


def test_gauges_sum_over_groups_and_count_ranks_once() -> None:
    load = rows(
        # one scheduler group reported by two TP ranks (same batch): counted once
        ("e1", "sglang:num_running_reqs", {**BASE, "tp_rank": "0"}, 10.0, 4),
        ("e1", "sglang:num_running_reqs", {**BASE, "tp_rank": "1"}, 10.0, 4),
        # two data-parallel groups of another engine: summed
        ("e2", "sglang:num_running_reqs", {**BASE, "tp_rank": "0", "dp_rank": "0"}, 10.5, 3),
        ("e2", "sglang:num_running_reqs", {**BASE, "tp_rank": "4", "dp_rank": "1"}, 10.5, 5),
        # token usage takes the fullest group, not the sum
        ("e2", "sglang:token_usage", {**BASE, "tp_rank": "0", "dp_rank": "0"}, 10.5, 0.5),
        ("e2", "sglang:token_usage", {**BASE, "tp_rank": "4", "dp_rank": "1"}, 10.5, 0.9),
        # metrics no track reads are left out
        ("e1", "sglang:cache_hit_rate", {**BASE, "tp_rank": "0"}, 10.0, 0.3),
    )
    tracks = load_tracks(load)
    assert track(tracks, "e1", "running") == [(10.0, 4.0)]
    assert track(tracks, "e2", "running") == [(10.5, 8.0)]
    assert track(tracks, "e2", "token_usage") == [(10.5, 0.9)]
    assert set(tracks["track"]) == {"running", "token_usage"}
    assert tracks[["engine", "track", "ts"]].equals(
        tracks.sort_values(["engine", "track", "ts"])[["engine", "track", "ts"]])


def test_priority_breakdowns_are_left_out_beside_their_total() -> None:
    with_total = dict(BASE, tp_rank="0", priority="")
    load = rows(
        ("e1", "sglang:num_queue_reqs", with_total, 1.0, 7),
        ("e1", "sglang:num_queue_reqs", {**with_total, "priority": "0"}, 1.0, 3),
        ("e1", "sglang:num_queue_reqs", {**with_total, "priority": "5"}, 1.0, 4),
        # an engine that only writes breakdowns keeps them
        ("e2", "sglang:num_queue_reqs", {**with_total, "priority": "0"}, 1.0, 2),
        ("e2", "sglang:num_queue_reqs", {**with_total, "priority": "1"}, 1.0, 6),
    )
    tracks = load_tracks(load)
    assert track(tracks, "e1", "queued") == [(1.0, 7.0)]
    assert track(tracks, "e2", "queued") == [(1.0, 8.0)]


def test_counters_become_rates_and_a_restart_counts_from_zero() -> None:
    labels = {**BASE, "tp_rank": "0"}
    load = rows(*[("e1", "sglang:num_retracted_requests_total", labels, ts, value)
                  for ts, value in ((0.0, 10), (1.0, 12), (3.0, 18), (4.0, 1), (5.0, 1),
                                    (6.0, math.nan), (7.0, 4))])
    # a reading that is not a number gives no rate on either side of it
    assert track(load_tracks(load), "e1", "retractions") == [
        (1.0, 2.0), (3.0, 3.0), (4.0, 1.0), (5.0, 0.0)]


def test_each_engine_reads_the_first_candidate_it_exposes() -> None:
    labels = {**BASE, "tp_rank": "0"}
    load = rows(
        # a version with the throughput gauge
        ("new", "sglang:gen_throughput", labels, 1.0, 900.0),
        ("new", "sglang:generation_tokens_total", {**labels, "is_streaming": "false"}, 1.0, 5),
        # one without it: decode tokens from the realtime counter, per second
        ("old", "sglang:realtime_tokens_total", {**labels, "mode": "decode"}, 1.0, 100),
        ("old", "sglang:realtime_tokens_total", {**labels, "mode": "decode"}, 3.0, 700),
        ("old", "sglang:realtime_tokens_total", {**labels, "mode": "prefill_compute"}, 3.0, 9e9),
        # retractions as the old gauge where the counter is missing
        ("old", "sglang:num_retracted_reqs", labels, 3.0, 2),
        # token usage from the full-attention pool's when the overall one is missing
        ("old", "sglang:full_token_usage", labels, 3.0, 0.75),
    )
    tracks = load_tracks(load)
    assert track(tracks, "new", "throughput") == [(1.0, 900.0)]
    assert track(tracks, "old", "throughput") == [(3.0, 300.0)]
    assert track(tracks, "old", "retractions") == [(3.0, 2.0)]
    assert track(tracks, "old", "token_usage") == [(3.0, 0.75)]


def test_values_that_are_not_finite_are_left_out() -> None:
    labels = {**BASE, "tp_rank": "0"}
    load = rows(("e1", "sglang:token_usage", labels, 1.0, math.nan),
                ("e1", "sglang:token_usage", labels, 2.0, math.inf),
                ("e1", "sglang:token_usage", labels, 3.0, 0.5))
    assert track(load_tracks(load), "e1", "token_usage") == [(3.0, 0.5)]
    assert math.isnan(load["value"].iloc[0])  # the table itself keeps what was written


def test_alignment_shifts_only_engines_named_after_a_skewed_host() -> None:
    load = rows(("host-a", "sglang:num_running_reqs", {}, 100.0, 1),
                ("10.0.0.1:30000", "sglang:num_running_reqs", {}, 100.0, 1))
    skew = pd.DataFrame({"host": ["host-a", "host-b"], "skew": [1.5, -2.0]})
    shifted = aligned(load, skew)
    assert shifted["ts"].tolist() == [101.5, 100.0]
    assert aligned(load, pd.DataFrame()) is load
    assert load["ts"].tolist() == [100.0, 100.0]


def test_combining_dumps_keeps_each_scrape_once() -> None:
    first = rows(("a", "sglang:m", {}, 1.0, 1), ("a", "sglang:m", {"x": "1"}, 1.0, 2),
                 ("a", "sglang:m", {}, 2.0, 3))
    second = rows(("a", "sglang:m", {}, 2.0, 3), ("b", "sglang:n", {}, 2.0, 4),
                  ("a", "sglang:m", {}, 3.0, 5))
    both = combine_engine_load([first, empty_engine_load(), second])
    assert list(zip(both["engine"], both["ts"], both["value"], strict=True)) == [
        ("a", 1.0, 1.0), ("a", 1.0, 2.0), ("a", 2.0, 3.0), ("b", 2.0, 4.0), ("a", 3.0, 5.0)]
    assert str(both["labels"].dtype) == "category"


def test_tracks_of_many_engines_are_vectorised() -> None:
    """A window of 16 engines: every scrape instant gives one row per engine and track."""
    engines, scrapes = 16, 120
    ts = np.repeat(np.arange(scrapes, dtype=float), engines)
    names = np.tile([f"e{i}" for i in range(engines)], scrapes)
    labels = canonical_labels({**BASE, "tp_rank": "0"})
    load = engine_load_frame(names, ["sglang:num_running_reqs"] * len(ts), [labels] * len(ts),
                             ts, np.ones(len(ts)))
    tracks = load_tracks(load)
    assert len(tracks) == engines * scrapes and set(tracks["value"]) == {1.0}
