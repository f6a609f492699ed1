"""What the join should make of SGLang's requests, read from what SGLang's code emitted
(:attr:`tests.support.sglang_driver.Driven.emitted`): the oracle the engine tests and
``benchmarks/bench_engine.py`` hold the join to.

Read the simple way: per request root, the lowest TP rank's thread spans, their slices,
with consecutive ``decode_loop`` siblings taken as one stretch; times into the dump's
clock by each host's known skew.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from slime_trace_widget.answers.engine import engine_breakdown
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import REQUEST_SPAN_NAMES

from .sglang_driver import DEFAULT_HOSTS, Driven, Half, Request

#: The hosts' clocks (engine time + skew = dump time) and trace levels the engine tests
#: and ``benchmarks/bench_engine.py`` drive: skews up to 1.5 s either way, and one host at
#: level 2 (no decode loops, no schedule events).
SKEWS = {DEFAULT_HOSTS[0]: 1.5, DEFAULT_HOSTS[1]: -1.5, DEFAULT_HOSTS[2]: 0.4}
LEVELS = {DEFAULT_HOSTS[0]: 3, DEFAULT_HOSTS[1]: 3, DEFAULT_HOSTS[2]: 2}

ROLE_OF_SPAN = {name: ("unified" if role == "" else role)
                for role, name in REQUEST_SPAN_NAMES.items()}


def sampled_halves(requests: list[Request]) -> Iterator[tuple[Request, Half]]:
    """Each half of each request SGLang traced (an unsampled traceparent drops one)."""
    for request in requests:
        if request.sampled:
            for half in request.halves:
                yield request, half


def request_spans(frames: TraceFrames) -> pd.DataFrame:
    """The request spans the join attached."""
    spans = frames.spans
    return spans[((spans["origin"] == "engine") & spans["name"].isin(list(ROLE_OF_SPAN))
                  ).to_numpy()]


@dataclass
class Report:
    """The join against what was driven."""

    expected: int = 0          # request halves a sample made
    attached: int = 0          # attached under the generation span that made them
    wrong: int = 0             # attached anywhere else, or a request no sample made
    missed: int = 0
    slices: int = 0            # slices compared
    slice_mismatches: list[str] = field(default_factory=list)
    duration_errors: list[float] = field(default_factory=list)
    start_offsets: list[float] = field(default_factory=list)
    retraction_rows_wrong: int = 0

    @property
    def p95_start_offset(self) -> float:
        return float(np.percentile(self.start_offsets, 95)) if self.start_offsets else 0.0


def compare(frames: TraceFrames, driven: Driven, skews: Mapping[str, float]) -> Report:
    """Every request, slice and retraction of ``driven`` against the joined ``frames``."""
    report = Report()
    roots = request_spans(frames)
    role = roots["name"].astype(str).map(ROLE_OF_SPAN)
    made = Counter((request.span, half.role, half.server_rid)
                   for request, half in sampled_halves(driven.requests)
                   if request.span is not None)
    found = Counter(zip(roots["parent_index"].astype(int), role,
                        roots["attr.gen_ai.request.id"], strict=True))
    report.expected = sum(made.values())
    report.attached = sum((made & found).values())
    report.missed = report.expected - report.attached
    report.wrong = sum((found - made).values())
    emitted = Emitted(driven.emitted)
    spans = frames.spans
    for request, half in sampled_halves(driven.requests):
        if request.span is None:
            continue
        match = roots[((roots["parent_index"] == request.span) & (role == half.role)
                       & (roots["attr.gen_ai.request.id"] == half.server_rid)).to_numpy()]
        if len(match) != 1:
            continue
        expected = emitted.slices(half, skews[half.host])
        below = descendants(spans, int(match.index[0]))
        got = sorted(zip(below["name"].astype(str), below["start"], below["end"],
                         strict=True), key=lambda item: (item[1], item[0]))
        if [name for name, *_ in got] != [name for name, *_ in expected]:
            report.slice_mismatches.append(half.server_rid)
            continue
        for (_, start, end), (_, true_start, true_end) in zip(got, expected, strict=True):
            report.duration_errors.append(abs((end - start) - (true_end - true_start)))
            report.start_offsets.append(abs(start - true_start))
        report.slices += len(expected)
    truth: Counter[int] = Counter()
    rows = frames.span_core["sample_row"]
    for request, half in sampled_halves(driven.requests):
        if request.span is not None:
            truth[int(rows[request.span])] += half.retractions
    counted = engine_breakdown(frames)["retractions"]
    report.retraction_rows_wrong = int(sum(counted.get(row, 0) != truth.get(row, 0)
                                           for row in set(counted.index) | set(truth)))
    return report


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

    def slices(self, half: Half, skew: float) -> list[tuple[str, float, float]]:
        """(name, start, end) in the dump's clock (engine time + ``skew``) of what the join
        should draw under the half's request span, sorted by start."""
        roots = [row for row in self.rows if row["attributes"].get("gen_ai.request.id")
                 == half.server_rid and row["name"] == half.root_name]
        assert len(roots) == 1, half.server_rid
        threads: dict[str, dict] = {}
        for thread in self.children(roots[0]):
            label = thread["attributes"]["thread_label"]
            rank = thread["attributes"].get("tp_rank", 0)
            if label not in threads or rank < threads[label]["attributes"].get("tp_rank", 0):
                threads[label] = thread
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
