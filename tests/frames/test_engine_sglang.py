"""The join held to what SGLang 0.5.23's own tracing code wrote: every scenario of
``tests/support/sglang_driver.py`` (normal, chunked prefill, retracted, PD with and
without a client rid, TP=2, rids with ``_``, ``traceparent``, other clients' requests)
driven on three hosts whose clocks are off by up to 1.5 s, exported by SGLang's own
exporter into the receiver, and loaded with the dump (``load_frames(engine_traces=)``).

The oracle is what SGLang emitted (captured beside its exporter), read the simple way:
per request root, the lowest TP rank's thread spans, their slices with consecutive
``decode_loop`` siblings taken as one stretch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd
import pytest

from slime_trace_widget.answers.engine import engine_breakdown
from slime_trace_widget.frames.engine import REQUEST_SPAN_NAMES
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.loading import load_frames
from tests.support.receiver import start_receiver
from tests.support.sglang_driver import (
    DEFAULT_HOSTS,
    SCENARIOS,
    Driven,
    Half,
    Request,
    default_rids,
    drive,
    plan,
    write_dump,
)

SKEWS = {DEFAULT_HOSTS[0]: 1.5, DEFAULT_HOSTS[1]: -1.5, DEFAULT_HOSTS[2]: 0.4}
#: The third host traces at level 2 (no decode loops, no schedule events).
LEVELS = {DEFAULT_HOSTS[0]: 3, DEFAULT_HOSTS[1]: 3, DEFAULT_HOSTS[2]: 2}
#: The issue's bound on where a slice may be placed; SGLang's float stamps for durations.
START_TOLERANCE = 0.05
DURATION_TOLERANCE = 2e-6
DRIVE_SECONDS = 900
ROLE_OF_SPAN = {name: ("unified" if role == "" else role)
                for role, name in REQUEST_SPAN_NAMES.items()}


@dataclass
class Joined:
    frames: TraceFrames
    driven: Driven


@pytest.fixture(scope="module")
def joined(tmp_path_factory: pytest.TempPathFactory) -> Joined:
    work = tmp_path_factory.mktemp("sglang_join")
    dump = write_dump(work / "rollout_0.pt", default_rids(36, seed=7), seed=7)
    requests = plan(load_frames(str(dump), progress=False), (*SCENARIOS, "unsampled"), seed=7,
                    decode_iterations=(20, 60))
    with start_receiver(work / "engine") as receiver:
        driven = drive(requests, receiver.endpoint("grpc"), "grpc", SKEWS, LEVELS,
                       work / "hosts", timeout=DRIVE_SECONDS)
    assert driven.dropped == 0
    return Joined(load_frames(str(dump), progress=False, engine_traces=str(work / "engine")),
                  driven)


def sampled_halves(requests: list[Request]) -> Iterator[tuple[Request, Half]]:
    for request in requests:
        if request.sampled:
            for half in request.halves:
                yield request, half


def request_spans(frames: TraceFrames) -> pd.DataFrame:
    spans = frames.spans
    return spans[((spans["origin"] == "engine") & spans["name"].isin(list(ROLE_OF_SPAN))
                  ).to_numpy()]


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
    spans = joined.frames.spans
    roots = request_spans(joined.frames)
    emitted = Emitted(joined.driven.emitted)
    compared = 0
    for request, half in sampled_halves(joined.driven.requests):
        if request.span is None:
            continue
        role = roots["name"].astype(str).map(ROLE_OF_SPAN)
        match = roots[((roots["parent_index"] == request.span) & (role == half.role)
                       & (roots["attr.gen_ai.request.id"] == half.server_rid)).to_numpy()]
        assert len(match) == 1, half.server_rid
        expected = emitted.slices(half)
        below = descendants(spans, int(match.index[0]))
        got = sorted(zip(below["name"].astype(str), below["start"], below["end"],
                         strict=True), key=lambda item: (item[1], item[0]))
        assert [name for name, *_ in got] == [name for name, *_ in expected], half.server_rid
        for (_, start, end), (_, true_start, true_end) in zip(got, expected, strict=True):
            assert abs((end - start) - (true_end - true_start)) <= DURATION_TOLERANCE
            assert abs(start - true_start) <= START_TOLERANCE
        compared += len(expected)
    assert compared > 300


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


def descendants(spans: pd.DataFrame, root: int) -> pd.DataFrame:
    out, frontier = [], [root]
    while frontier:
        below = spans[spans["parent_index"].isin(frontier).to_numpy()]
        out.append(below)
        frontier = below.index.tolist()
    return pd.concat(out)


class Emitted:
    """What SGLang's code ended, by request root: the oracle for a request's slices."""

    def __init__(self, emitted: pd.DataFrame) -> None:
        self.rows = emitted.to_dict("records")
        self.kids: dict[tuple[str, str], list[dict]] = {}
        for row in self.rows:
            if isinstance(row["parent_id"], str):
                self.kids.setdefault((row["trace_id"], row["parent_id"]), []).append(row)

    def children(self, row: dict) -> list[dict]:
        return sorted(self.kids.get((row["trace_id"], row["span_id"]), []),
                      key=lambda kid: (kid["start_ns"], kid["name"]))

    def slices(self, half: Half) -> list[tuple[str, float, float]]:
        """(name, start, end) in the dump's clock of what the join should draw under the
        half's request span, sorted by start."""
        roots = [row for row in self.rows if row["attributes"].get("gen_ai.request.id")
                 == half.server_rid and row["name"] == half.root_name]
        assert len(roots) == 1, half.server_rid
        threads: dict[str, dict] = {}
        for thread in self.children(roots[0]):
            label = thread["attributes"]["thread_label"]
            rank = thread["attributes"].get("tp_rank", 0)
            if label not in threads or rank < threads[label]["attributes"].get("tp_rank", 0):
                threads[label] = thread
        skew = SKEWS[half.host]
        out: list[tuple[str, float, float]] = []
        stack = list(threads.values())
        while stack:
            kids = self.children(stack.pop())
            run: list[dict] = []
            for kid in [*kids, None]:
                if kid is not None and kid["name"] == "decode_loop":
                    run.append(kid)
                    continue
                if run:
                    out.append(("decode_loop", run[0]["start_ns"] / 1e9 + skew,
                                max(r["end_ns"] for r in run) / 1e9 + skew))
                    run = []
                if kid is not None:
                    out.append((kid["name"], kid["start_ns"] / 1e9 + skew,
                                kid["end_ns"] / 1e9 + skew))
                    stack.append(kid)
        return sorted(out, key=lambda item: (item[1], item[0]))
