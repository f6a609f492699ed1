"""The join held to what SGLang 0.5.23's own tracing code wrote: every scenario of
``tests/support/sglang_driver.py`` (normal, chunked prefill, retracted, PD with and
without a client rid, TP=2, rids with ``_``, ``traceparent``, other clients' requests)
driven on three hosts whose clocks are off by up to 1.5 s, exported by SGLang's own
exporter into the receiver, and loaded with the dump (``load_frames(engine_traces=)``).

The oracle is what SGLang emitted, captured beside its exporter
(``tests/support/engine_oracle.py``).
"""

from __future__ import annotations

from collections import Counter

import pytest

from slime_trace_widget.answers.engine import PHASE_COLUMNS, engine_breakdown
from tests.support.engine_oracle import (
    LEVELS,
    ROLE_OF_SPAN,
    SKEWS,
    compare,
    request_spans,
    sampled_halves,
)
from tests.support.sglang_driver import SCENARIOS
from tests.support.sglang_joined import Joined, drive_and_join

#: The issue's bound on where a slice may be placed; SGLang's float stamps for durations.
START_TOLERANCE = 0.05
DURATION_TOLERANCE = 2e-6


@pytest.fixture(scope="module")
def joined(tmp_path_factory: pytest.TempPathFactory) -> Joined:
    return drive_and_join(tmp_path_factory.mktemp("sglang_join"), 36, 7,
                          (*SCENARIOS, "unsampled"), decode_iterations=(20, 60))


def test_every_request_a_sample_made_is_attached_once_and_to_its_generation(
        joined: Joined) -> None:
    roots = request_spans(joined.frames)
    wanted = Counter((request.span, half.role, half.server_rid)
                     for request, half in sampled_halves(joined.driven.requests)
                     if request.span is not None)
    found = Counter((int(parent), ROLE_OF_SPAN[str(name)], rid) for parent, name, rid in zip(
        roots["parent_index"], roots["name"], roots["attr.gen_ai.request.id"], strict=True))
    assert found == wanted  # 0 wrong, 0 missed, each once
    scenarios = {request.scenario for request in joined.driven.requests if request.span}
    assert scenarios >= set(SCENARIOS) - {"stray"}
    tp2 = [request for request in joined.driven.requests if request.scenario == "tp2"]
    under = roots[roots["parent_index"].isin([r.span for r in tp2])]
    slices = joined.frames.spans[joined.frames.spans["parent_index"].isin(under.index)]
    scheduler = slices[(slices["attr.thread_label"] == "Scheduler").to_numpy()]
    assert len(scheduler) and (scheduler["attr.engine.tp_ranks"] == "0,1").all()


def test_requests_no_sample_made_stay_unmatched(joined: Joined) -> None:
    strays = {half.server_rid for request, half in sampled_halves(joined.driven.requests)
              if request.span is None}
    unsampled = {half.server_rid for request in joined.driven.requests
                 if not request.sampled for half in request.halves}
    assert strays and unsampled
    assert set(joined.frames.engine_unmatched["rid"]) == strays
    attached = set(request_spans(joined.frames)["attr.gen_ai.request.id"])
    assert not attached & (strays | unsampled)


def test_each_hosts_skew_is_found(joined: Joined) -> None:
    skew = joined.frames.engine_skew.set_index("host")["skew"]
    for host, truth in SKEWS.items():
        assert abs(skew[host] - truth) <= START_TOLERANCE, (host, skew[host], truth)


def test_slices_once_each_with_exact_durations_and_close_starts(joined: Joined) -> None:
    report = compare(joined.frames, joined.driven, SKEWS)
    assert report.attached == report.expected and not report.wrong and not report.missed
    assert report.slice_mismatches == []
    assert report.slices > 300
    assert max(report.duration_errors) <= DURATION_TOLERANCE
    assert max(report.start_offsets) <= START_TOLERANCE
    assert report.retraction_rows_wrong == 0


def test_retractions_per_sample_are_exact(joined: Joined) -> None:
    truth: Counter[int] = Counter()
    rows = joined.frames.span_core["sample_row"]
    for request, half in sampled_halves(joined.driven.requests):
        if request.span is not None:
            truth[int(rows[request.span])] += half.retractions
    assert sum(truth.values()) > 0
    breakdown = engine_breakdown(joined.frames)
    assert breakdown["retractions"].to_dict() == {row: truth.get(row, 0)
                                                  for row in breakdown.index}
    markers = joined.frames.events
    markers = markers[((markers["origin"] == "engine") & (markers["name"] == "retract")
                       ).to_numpy()]
    assert len(markers) == sum(truth.values())


def test_decode_iterations_are_kept_as_counts_not_spans(joined: Joined) -> None:
    spans = joined.frames.spans
    loops = spans[((spans["origin"] == "engine") & (spans["name"] == "decode_loop")).to_numpy()]
    driven = sum(half.decode_iterations for request, half in
                 sampled_halves(joined.driven.requests)
                 if request.span is not None and LEVELS[half.host] == 3)
    assert loops["attr.engine.decode_loops"].sum() == driven > 0
    assert len(loops) * 10 < driven
    engine_events = joined.frames.events
    assert (engine_events["origin"] == "engine").sum() < len(loops) + 200


def test_decode_waiting_is_queue_and_pd_only_under_pd(joined: Joined) -> None:
    breakdown = engine_breakdown(joined.frames)
    rows = joined.frames.span_core["sample_row"]
    pd_rows = {int(rows[r.span]) for r in joined.driven.requests
               if r.span is not None and len(r.halves) == 2}
    plain = breakdown.drop(index=list(pd_rows))
    assert (plain["pd_s"] == 0).all() and (plain["queue_s"] > 0).all()
    assert (breakdown.loc[sorted(pd_rows), "pd_s"] > 0).all()


def test_phases_of_each_sample_add_up_to_no_more_than_its_generations(joined: Joined) -> None:
    """A sample's phases partition wall time: under PD too, where both servers' slices
    cover the same instants, they add up to at most its generation spans' time."""
    core = joined.frames.span_core
    generations = core.loc[request_spans(joined.frames)["parent_index"].unique()]
    covered = (generations["end"] - generations["start"]).groupby(
        generations["sample_row"]).sum()
    phases = engine_breakdown(joined.frames)[list(PHASE_COLUMNS)].sum(axis=1)
    assert (phases.reindex(covered.index) > 0).all()
    assert (phases.reindex(covered.index) <= covered + 1e-6).all()
