"""Ends sent again (``span_end_resent``: end attributes added after the end was sent), read
from a real store (``LiveStore`` files): the latest sending of an end takes its place, in
``load_live`` and in a reader's polls alike, never as a second end; one whose end was
never taken is counted and left out; a resent end is a numbered record, so the loss
accounting counts it and finds nothing missing."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from slime_trace_widget.schema import LIVE_END_RESENT
from slime_trace_widget.sources.live import LiveReader, load_live
from slime_trace_widget.sources.live.carriers import RESENT_WITHOUT_END
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


def test_a_resent_end_whose_end_was_never_taken_is_counted_and_left_out(
        tmp_path: Path) -> None:
    store = store_in(tmp_path)
    # the end (number 2) was lost; its sending again (3) comes; and another trace's
    # end was sent under the rollout before, its sending again under this one (4)
    store.append(live_rows([span("t", "s1", T0)], sender=SENDER, rollout=2))
    reader = LiveReader(tmp_path, engine_traces=False)
    reader.poll(now=T0 + 1)
    store.append(resent(live_rows([ended("t", "s1", T0 + 1, late=2),
                                   ended("u", "s2", T0 + 1, late=2)],
                                  sender=SENDER, rollout=2, first_seq=3)))
    delta = reader.poll(now=T0 + 2)
    assert delta.records == 0 and delta.samples.empty and len(delta.open_spans) == 1
    for frames in (reader.frames(now=T0 + 2),
                   load_live(tmp_path, now=T0 + 2, engine_traces=False)):
        assert frames.warnings[RESENT_WITHOUT_END] == 2
        assert list(frames.spans["state"]) == ["open"] and frames.events.empty
        assert list(frames.samples["trace_id"]) == ["t"]
    (sender,) = load_live(tmp_path, now=T0 + 2, engine_traces=False).live.senders
    assert sender.missing == 1  # the lost end, and only it
    store.close()
