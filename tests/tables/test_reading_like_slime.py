"""Records read as slime's viewer reads them, by the native passes and by Python alike.

Each test flattens a small carrier twice, once with the compiled passes (where they
were built) and once with the Python passes only, and states the same promise of both.
"""

from __future__ import annotations

from collections import Counter

import pytest

from slime_trace_widget.tables import carrier
from slime_trace_widget.tables.attr_columns import AttrTable
from slime_trace_widget.tables.build import build_tables


def start(name: str, span_id: str, ts: float, **extra: object) -> dict:
    return {"type": "span_start", "name": name, "ts": ts, "span_id": span_id, "attempt": 0,
            **extra}


def end(name: str, span_id: str, ts: float) -> dict:
    return {"type": "span_end", "name": name, "ts": ts, "span_id": span_id, "attempt": 0}


def spans_of(events: list[dict], carrier_attempt: int = 0) -> tuple[dict[str, list], Counter]:
    """The span core table of one sample carrying ``events``, as columns, and warnings."""
    tables = build_tables([{"index": 0, "trace": {"attempt": carrier_attempt,
                                                  "events": events}}])
    return tables.span_core.to_pydict(), tables.warnings


def test_an_open_span_starting_after_its_ancestor_ended_is_drawn_to_its_row_end(
        passes: str) -> None:
    """An ancestor's end cuts an open span only when it is later than the span's start
    (slime's viewer): otherwise the span runs to its row's last timestamp."""
    spans, _ = spans_of([start("g", "G", 1.0), end("g", "G", 2.0),
                         start("c", "C", 3.0, parent_span_id="G"),
                         start("x", "X", 4.0), end("x", "X", 9.0)])
    at = spans["span_id"].index("C")
    assert spans["state"][at] == "open"
    assert spans["display_end"][at] == 9.0
    assert spans["clip_reason"][at] == "row_end"


def test_an_ancestor_ending_after_an_open_span_started_still_cuts_it(passes: str) -> None:
    """The rule above leaves the ordinary case alone: a closed ancestor ending after the
    open span began is where the span is drawn to."""
    spans, _ = spans_of([start("g", "G", 1.0), start("c", "C", 2.0, parent_span_id="G"),
                         end("g", "G", 5.0), start("x", "X", 6.0), end("x", "X", 9.0)])
    at = spans["span_id"].index("C")
    assert spans["display_end"][at] == 5.0
    assert spans["clip_reason"][at] == "ancestor_end"


def test_a_parent_named_by_a_reused_id_is_the_span_of_that_id_open_then(passes: str) -> None:
    """A child naming an id used twice hangs under the span of that id open when the
    child starts, not under the first (already closed) one."""
    spans, _ = spans_of([start("a", "A", 1.0), end("a", "A", 2.0), start("a", "A", 3.0),
                         start("b", "B", 4.0, parent_span_id="A"), end("b", "B", 5.0),
                         end("a", "A", 6.0)])
    child = spans["span_id"].index("B")
    parent = spans["parent_index"][child]
    assert spans["start"][parent] == 3.0
    assert spans["depth"][child] == 1


def test_a_parent_named_by_a_reused_id_after_both_ended_is_the_latest_one(
        passes: str) -> None:
    """With no span of that id open, the latest one started before the child is its
    parent."""
    spans, _ = spans_of([start("a", "A", 1.0), end("a", "A", 2.0), start("a", "A", 3.0),
                         end("a", "A", 4.0), start("b", "B", 5.0, parent_span_id="A"),
                         end("b", "B", 6.0)])
    child = spans["span_id"].index("B")
    assert spans["start"][spans["parent_index"][child]] == 3.0


def test_an_empty_parent_id_is_no_parent_and_the_parent_is_inferred(passes: str) -> None:
    """``parent_span_id: ""`` reads as no parent (slime's viewer: ``parent_span_id or
    inferred``): the span hangs under the open span it starts in, with no warning."""
    spans, warnings = spans_of([start("a", "A", 1.0),
                                start("b", "B", 2.0, parent_span_id=""),
                                end("b", "B", 3.0), end("a", "A", 4.0)])
    child = spans["span_id"].index("B")
    assert spans["parent_index"][child] == spans["span_id"].index("A")
    assert spans["parent_span_id"][child] == "A"
    assert "unknown_parent" not in warnings


def test_an_empty_parent_id_with_nothing_open_is_a_root_without_warning(passes: str) -> None:
    spans, warnings = spans_of([start("b", "B", 2.0, parent_span_id=""), end("b", "B", 3.0)])
    assert spans["parent_index"] == [-1]
    assert spans["parent_span_id"] == [None]
    assert "unknown_parent" not in warnings


def test_a_record_without_attempt_takes_its_carriers_attempt(passes: str) -> None:
    """A damaged record missing ``attempt`` reads as its carrier's attempt (slime's
    viewer), not as attempt 0."""
    records = [{"type": "span_start", "name": "a", "ts": 1.0, "span_id": "A"},
               {"type": "span_end", "name": "a", "ts": 2.0, "span_id": "A"}]
    spans, _ = spans_of(records, carrier_attempt=2)
    assert spans["attempt"] == [2]
    assert spans["end_attempt"] == [2]


def test_attribute_keys_that_make_the_same_text_keep_the_last_and_warn(passes: str) -> None:
    """Keys ``1`` and ``"1"`` both become ``"1"``: the later value in the dict wins and
    each value lost is counted as ``attr_key_collision``."""
    warnings: Counter[str] = Counter()
    table = AttrTable.from_dicts([{1: "a", "1": "b"}, {"x": 1}], warnings)
    assert table.column("1").to_pylist()[0] == "b"
    assert warnings["attr_key_collision"] == 1


def test_attribute_keys_that_stay_distinct_count_no_collision(passes: str) -> None:
    warnings: Counter[str] = Counter()
    AttrTable.from_dicts([{1: "a", "2": "b"}, {"x": 1}], warnings)
    assert "attr_key_collision" not in warnings


def _columns(records: list, carrier_attempt: int) -> carrier.RecordColumns:
    """One carrier's columns, read by whichever records pass ``carrier`` has now."""
    out = carrier.RecordColumns()
    carrier.read_carrier(0, records, out, carrier_attempt)
    return out


@pytest.mark.skipif(carrier._native_records is None, reason="built without a C compiler")
def test_the_native_records_pass_reads_these_rules_itself_and_as_python_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The native pass takes carriers with an empty parent id or records without an
    attempt (it leaves reused ids to Python), and makes the Python pass's columns."""
    taken = [start("a", "A", 1.0), start("b", "B", 2.0, parent_span_id=""),
             {"type": "event", "name": "e", "ts": 2.5, "parent_span_id": ""},
             {"type": "span_start", "name": "c", "ts": 3.0, "span_id": "C"},
             {"type": "span_end", "name": "c", "ts": 3.5, "span_id": "C"},
             end("b", "B", 4.0), end("a", "A", 5.0)]
    reused = [start("a", "A", 1.0), end("a", "A", 2.0), start("a", "A", 3.0),
              start("b", "B", 4.0, parent_span_id="A"), end("b", "B", 5.0)]
    native = carrier._native_records
    fields = (carrier._NATIVE_FIELDS, carrier._NATIVE_KINDS,
              (carrier.TS_LIMIT, carrier.MAX_ATTEMPT, carrier.PARENT_SCAN), 0, 0, 3)
    assert native.read_records(taken, *fields) is not None
    assert native.read_records(reused, *fields) is None
    for records in (taken, reused):
        by_native = _columns(records, 3)
        monkeypatch.setattr(carrier, "_native_records", None)
        by_python = _columns(records, 3)
        monkeypatch.setattr(carrier, "_native_records", native)
        assert vars(by_native) == vars(by_python)
    read = _columns(taken, 3)
    assert read.span_attempt == [0, 0, 3]
    assert read.span_parent_id == [None, "A", "B"]
    assert read.event_parent_id == ["B"]
