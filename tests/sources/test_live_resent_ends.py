"""Ends sent again (``span_end_resent``: end attributes added after the end was sent), read
from a real store (``LiveStore`` files): the latest sending of an end takes its place, in
``load_live`` and in a reader's polls alike, never as a second end; one whose end was
not taken is that end (its loss still told by the loss accounting), one of a trace not
in the rollout is counted and left out; a resent end is a numbered record, so the loss
accounting counts it and finds nothing missing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from slime_trace_widget.schema import LIVE_END_RESENT
from slime_trace_widget.sources.live import LiveReader, load_live
from slime_trace_widget.sources.live.carriers import (
    RESENT_WITHOUT_END,
    LiveCarriers,
    read_rows,
)
from tests.sources.test_live_reader import T0, live_rows, span, store_in

SENDER = "a:1:0"


def ended(trace: str, span_id: str, ts: float, **attrs: object) -> dict:
    return {**span(trace, span_id, ts, end=True), "attrs": attrs}


def resent(table: pa.Table) -> pa.Table:
    """``table``'s rows as ends sent again (their bodies stay ``span_end`` records)."""
    records = pa.array([LIVE_END_RESENT] * len(table), pa.string())
    return table.set_column(table.schema.get_field_index("record"), "record", records)


def end_attrs(frames: object, name: str = "generate") -> list[dict]:
    spans = frames.spans  # type: ignore[attr-defined]
    return list(spans.loc[spans["name"] == name, "end_attrs"])


def test_the_latest_sending_of_an_end_takes_its_place(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    store.append(live_rows([span("t", "s1", T0), ended("t", "s1", T0 + 1, early=1)],
                           sender=SENDER, rollout=2))
    reader = LiveReader(tmp_path, engine_traces=False)
    first = reader.poll(now=T0 + 2)
    assert list(first.closed["span_id"]) == ["s1"]
    # numbers 4 then 3: the later sending (4) wins whatever order they arrive in
    store.append(resent(live_rows([ended("t", "s1", T0 + 1, early=1, late=2, last=3)],
                                  sender=SENDER, rollout=2, first_seq=4)))
    store.append(resent(live_rows([ended("t", "s1", T0 + 1, early=1, late=2)],
                                  sender=SENDER, rollout=2, first_seq=3)))
    delta = reader.poll(now=T0 + 3)
    assert delta.records == 2 and list(delta.samples["trace_id"]) == ["t"]
    assert delta.closed.empty and delta.opened.empty and delta.open_spans.empty
    expected = [{"early": 1, "late": 2, "last": 3}]
    polled = reader.frames(now=T0 + 3)
    loaded = load_live(tmp_path, now=T0 + 3, engine_traces=False)
    for frames in (polled, loaded):
        assert end_attrs(frames) == expected
        assert list(frames.spans["state"]) == ["closed"] and frames.events.empty
        assert frames.warnings.get(RESENT_WITHOUT_END, 0) == 0
    (sender,) = loaded.live.senders
    assert (sender.records, sender.missing) == (4, 0)
    store.close()


def test_an_end_and_its_resending_in_one_batch_are_one_end(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    rows = live_rows([span("t", "s1", T0), ended("t", "s1", T0 + 1, early=1),
                      ended("t", "s1", T0 + 1, early=1, late=2)], sender=SENDER, rollout=2)
    is_last = pc.equal(rows["seq"], 3)
    rows = rows.set_column(rows.schema.get_field_index("record"), "record",
                           pc.if_else(is_last, LIVE_END_RESENT, rows["record"]))
    store.append(rows)
    delta = LiveReader(tmp_path, engine_traces=False).poll(now=T0 + 2)
    assert list(delta.closed["span_id"]) == ["s1"]  # closed once
    assert end_attrs(load_live(tmp_path, now=T0 + 2, engine_traces=False)) == [
        {"early": 1, "late": 2}]
    store.close()


def test_a_resent_end_whose_end_was_lost_is_the_end(tmp_path: Path) -> None:
    store = store_in(tmp_path)
    # the end (number 2) was dropped at the sender; its sending again (3) comes; and
    # another trace's end was sent under the rollout before, its sending again under
    # this one (4): that trace has no record here, so it is counted and left out
    store.append(live_rows([span("t", "s1", T0)], sender=SENDER, rollout=2))
    reader = LiveReader(tmp_path, engine_traces=False)
    reader.poll(now=T0 + 1)
    store.append(resent(live_rows([ended("t", "s1", T0 + 1, late=2),
                                   ended("u", "s2", T0 + 1, late=2)],
                                  sender=SENDER, rollout=2, first_seq=3)))
    delta = reader.poll(now=T0 + 2)
    assert delta.records == 1 and list(delta.samples["trace_id"]) == ["t"]
    assert list(delta.closed["span_id"]) == ["s1"] and delta.open_spans.empty
    for frames in (reader.frames(now=T0 + 2),
                   load_live(tmp_path, now=T0 + 2, engine_traces=False)):
        assert frames.warnings[RESENT_WITHOUT_END] == 1  # u's
        assert list(frames.spans["state"]) == ["closed"] and frames.events.empty
        assert list(frames.spans["end"]) == [T0 + 1] and end_attrs(frames) == [{"late": 2}]
        assert list(frames.samples["trace_id"]) == ["t"]
    (sender,) = load_live(tmp_path, now=T0 + 2, engine_traces=False).live.senders
    assert sender.missing == 1  # the lost end is still told lost, and only it
    store.close()


def named(kind: str, name: str, span_id: str, ts: float) -> dict:
    return {"type": kind, "name": name, "ts": ts, "trace_id": "t", "span_id": span_id,
            "sample_id": 0}


def test_a_lost_end_stands_where_it_was_recorded(tmp_path: Path) -> None:
    """The span after the lost end is not taken for its child (parents are inferred in
    the sender's order, where the end stood), as in the dump."""
    store = store_in(tmp_path)
    store.append(live_rows([named("span_start", "sample", "r", T0),
                            named("span_start", "generate", "g", T0 + 1)],
                           sender=SENDER, rollout=2))
    # number 3, generate's end at T0 + 2, was dropped at the sender
    store.append(live_rows([named("span_start", "reward", "w", T0 + 3),
                            named("span_end", "reward", "w", T0 + 4)],
                           sender=SENDER, rollout=2, first_seq=4))
    store.append(resent(live_rows([{**named("span_end", "generate", "g", T0 + 2),
                                    "attrs": {"late": 1}}],
                                  sender=SENDER, rollout=2, first_seq=6)))
    frames = load_live(tmp_path, now=T0 + 5, engine_traces=False)
    spans = frames.spans.set_index("name")
    assert spans.at["generate", "state"] == "closed" and spans.at["generate", "end"] == T0 + 2
    assert spans.at["reward", "parent_name"] == "sample"
    assert spans.at["generate", "parent_name"] == "sample"
    store.close()


def test_an_end_arriving_after_its_sending_again_is_not_a_second_end(tmp_path: Path
                                                                      ) -> None:
    store = store_in(tmp_path)
    store.append(live_rows([span("t", "s1", T0)], sender=SENDER, rollout=2))
    reader = LiveReader(tmp_path, engine_traces=False)
    reader.poll(now=T0 + 1)
    # swapped in transit: the sending again (3) before the end (2)
    store.append(resent(live_rows([ended("t", "s1", T0 + 1, early=1, late=2)],
                                  sender=SENDER, rollout=2, first_seq=3)))
    assert list(reader.poll(now=T0 + 2).closed["span_id"]) == ["s1"]
    store.append(live_rows([ended("t", "s1", T0 + 1, early=1)], sender=SENDER, rollout=2,
                           first_seq=2))
    delta = reader.poll(now=T0 + 3)
    assert delta.records == 1 and delta.closed.empty and delta.open_spans.empty
    for frames in (reader.frames(now=T0 + 3),
                   load_live(tmp_path, now=T0 + 3, engine_traces=False)):
        assert end_attrs(frames) == [{"early": 1, "late": 2}]  # the later attributes
        assert list(frames.spans["state"]) == ["closed"]
        assert frames.events.empty  # no second end, unmatched
        assert RESENT_WITHOUT_END not in frames.warnings
    (sender,) = load_live(tmp_path, now=T0 + 3, engine_traces=False).live.senders
    assert (sender.records, sender.missing) == (3, 0)
    store.close()


def _scanned(arrivals: list[tuple[int, dict, bool]]) -> list[dict]:
    """The records a trace holds by the rule as a scan states it: a sending again takes
    the place of the sender's latest end (in arrival order) of its span id numbered
    before it, unless a later sending took it."""
    items: list[list] = []
    taken_by: dict[int, int] = {}
    for seq, record, again in arrivals:
        if not again:
            items.append([seq, record])
            continue
        for item in reversed(items):
            end = item[1]
            if item[0] < seq and end["type"] == "span_end" and end["span_id"] == record["span_id"]:
                if taken_by.get(item[0], 0) < seq:
                    item[1], taken_by[item[0]] = record, seq
                break
    return [record for _, record in sorted(items, key=lambda item: item[0])]


def test_interleaved_sendings_again_give_the_ends_the_rule_states() -> None:
    """Many ends sent again, several times, interleaved with other records, reused span
    ids, arrivals out of order (a sending again after its end) and several polls: the
    indexed lookup keeps what the scan of the sender's records keeps."""
    rng = np.random.default_rng(7)
    records: list[tuple[int, dict, bool]] = []
    arrive: dict[int, float] = {}
    open_ids: list[str] = []
    ends: list[tuple[int, dict]] = []
    for seq in range(1, 3001):
        choice = rng.random()
        arrive[seq] = seq + rng.uniform(0, 30)
        if choice < 0.35 or not open_ids:
            span_id = f"s{rng.integers(400)}"  # ids come back: a span id ended twice
            open_ids.append(span_id)
            records.append((seq, span("t", span_id, T0 + seq / 100), False))
        elif choice < 0.7 or not ends:
            span_id = open_ids.pop(int(rng.integers(len(open_ids))))
            ends.append((seq, ended("t", span_id, T0 + seq / 100, n=seq)))
            records.append((seq, ends[-1][1], False))
        else:
            number, end = ends[int(rng.integers(len(ends)))]
            records.append((seq, {**end, "attrs": {"n": number, "again": seq}}, True))
            arrive[seq] = max(arrive[seq], arrive[number] + 0.5)  # after its end
    arrivals = sorted(records, key=lambda item: arrive[item[0]])
    assert sum(again for _, _, again in arrivals) > 500

    carriers = LiveCarriers()
    cuts = sorted(rng.choice(np.arange(1, len(arrivals)), 20, replace=False).tolist())
    for chunk in np.split(np.array(arrivals, dtype=object), cuts):
        table = pa.concat_tables(
            resent(rows) if again else rows
            for seq, record, again in chunk
            for rows in [live_rows([record], sender=SENDER, rollout=2, first_seq=seq)])
        every = np.ones(len(table), dtype=bool)
        carriers.take(read_rows(table, every), every)
    (trace,) = carriers.traces.values()
    assert trace.records() == _scanned(arrivals)
    assert not carriers.warnings
