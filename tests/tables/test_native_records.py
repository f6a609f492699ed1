"""Reading carriers: the native pass against the Python pass, record for record."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget.sources.dumps import worker
from slime_trace_widget.tables import carrier
from slime_trace_widget.tables.samples import sample_fields
from tests.tables.test_attr_grouping import _can_compile

FIXTURES = Path(__file__).parents[1] / "fixtures"
native = carrier._native_records
needs_native = pytest.mark.skipif(native is None, reason="built without a C compiler")


def test_the_native_records_pass_is_built_where_a_c_compiler_is() -> None:
    if not _can_compile():
        pytest.skip("no C compiler or no Python headers here: the package runs its Python pass")
    assert native is not None, "pip install -e . did not compile _native_records.c"


def _read(carriers: list, monkeypatch: pytest.MonkeyPatch, module: object
          ) -> tuple[carrier.RecordColumns, int]:
    """The columns of ``carriers`` read with ``module`` as the native pass (None: Python
    only), and how many carriers the native pass took."""
    monkeypatch.setattr(carrier, "_native_records", module)
    taken = 0
    if module is not None:
        original = module.read_records

        class Counting:
            @staticmethod
            def read_records(*args: object) -> object:
                nonlocal taken
                read = original(*args)
                taken += read is not None
                return read

        monkeypatch.setattr(carrier, "_native_records", Counting)
    out = carrier.RecordColumns()
    for row, records in enumerate(carriers):
        carrier.read_carrier(row, records, out)
    return out, taken


def _same(value: object, other: object) -> bool:
    """Equal, NaN equal to NaN, and of the same types (an int is not a float here)."""
    if isinstance(value, list) and isinstance(other, list):
        return len(value) == len(other) and all(map(_same, value, other))
    if isinstance(value, float) and isinstance(other, float) and math.isnan(value):
        return math.isnan(other)
    return type(value) is type(other) and value == other


def _assert_same_both_ways(carriers: list, monkeypatch: pytest.MonkeyPatch) -> int:
    by_native, taken = _read(carriers, monkeypatch, native)
    by_python, _ = _read(carriers, monkeypatch, None)
    for column in fields(carrier.RecordColumns):
        assert _same(getattr(by_native, column.name), getattr(by_python, column.name)), \
            column.name
    return taken


@needs_native
@pytest.mark.parametrize("name", sorted(path.name for path in FIXTURES.glob("*.pt")
                                        if not path.name.startswith("edge_corrupt")))
def test_every_fixture_reads_the_same_either_way(name: str, monkeypatch) -> None:
    loaded = worker.read_for_frames(str(FIXTURES / name))
    carriers = [info.events for info in (sample_fields(sample, None, 0)
                                         for sample in loaded.samples)
                if info.events is not None]
    _assert_same_both_ways(carriers, monkeypatch)


def _start(sid: object, ts: object, name: object = "s", parent: object = None, **more) -> dict:
    record = {"type": "span_start", "name": name, "ts": ts, "span_id": sid, **more}
    if parent is not None:
        record["parent_span_id"] = parent
    return record


def _end(sid: object, ts: object, **more) -> dict:
    return {"type": "span_end", "name": "s", "ts": ts, "span_id": sid, **more}


def _event(ts: object, parent: object = None, **more) -> dict:
    record = {"type": "event", "name": "e", "ts": ts, **more}
    if parent is not None:
        record["parent_span_id"] = parent
    return record


#: Records only the Python pass reads (each sends its carrier there, whole).
ODD = [
    lambda: _start("x", 3),  # an int ts
    lambda: _start("x", math.nan),
    lambda: _start("x", 1e16),
    lambda: _start(7, 1.0),  # an id that is not text
    lambda: _start(None, 1.0),
    lambda: _start("x", 1.0, name=None),
    lambda: _start("x", 1.0, attempt=True),
    lambda: _start("x", 1.0, attempt=-1),
    lambda: _start("x", 1.0, attempt=2**40),
    lambda: _start("x", 1.0, attrs=[1]),
    lambda: _start("x", 1.0, parent=5),
    lambda: _end("never-started", 1.0),
    lambda: OrderedDict(_event(1.0)),
    lambda: "not a record",
    lambda: _event(1.0, type=b"event"),
]


def _carrier(rng: np.random.Generator, odd: bool) -> list:
    """A carrier as tracing writes one (nested and concurrent spans, events, ends out of
    order, equal times), with shuffles, repeated ids, second ends, parents named before
    they start, self parents, unknown types, empty attrs and, when ``odd``, a record
    only Python reads."""
    records: list = []
    open_ids: list[str] = []
    ended: list[str] = []
    clock = 100.0
    for step in range(int(rng.integers(1, 60))):
        clock += float(rng.random()) if rng.random() < 0.7 else 0.0  # ties: a parent's own ts
        roll = rng.random()
        if roll < 0.4 or not open_ids:
            sid = f"s{int(rng.integers(0, 40))}" if rng.random() < 0.1 else f"s{step}"
            parent = None
            if open_ids and rng.random() < 0.5:
                parent = open_ids[int(rng.integers(len(open_ids)))]
            elif rng.random() < 0.05:
                parent = f"s{step + int(rng.integers(0, 3))}"  # later, or itself
            attrs = [None, {}, {"k": step}, {"k": "v", "n": 1.5}][int(rng.integers(4))]
            record = _start(sid, clock, parent=parent, attempt=int(rng.integers(0, 3)))
            if attrs is not None:
                record["attrs"] = attrs
            records.append(record)
            open_ids.append(sid)
        elif roll < 0.75:
            sid = open_ids.pop(int(rng.integers(len(open_ids))))
            records.append(_end(sid, clock, attrs={"done": True}))
            ended.append(sid)
        elif roll < 0.77 and ended:  # a second end
            records.append(_end(ended[int(rng.integers(len(ended)))], clock))
        elif roll < 0.95:
            parent = open_ids[-1] if rng.random() < 0.3 else None
            records.append(_event(clock, parent=parent))
        else:
            records.append({"type": "mystery", "name": "m", "ts": clock})
    if rng.random() < 0.2:
        order = rng.permutation(len(records))
        records = [records[i] for i in order]
    if odd:
        records.insert(int(rng.integers(len(records) + 1)), ODD[int(rng.integers(len(ODD)))]())
    return records


@needs_native
def test_crafted_carriers_read_the_same_either_way(monkeypatch) -> None:
    rng = np.random.default_rng(44)
    carriers = [_carrier(rng, odd=trial % 4 == 0) for trial in range(400)]
    taken = _assert_same_both_ways(carriers, monkeypatch)
    assert 0 < taken < len(carriers)  # both passes were met


@needs_native
def test_each_odd_record_sends_its_carrier_to_python() -> None:
    plain = [_start("a", 1.0), _event(1.5), _end("a", 2.0)]
    keys = carrier._NATIVE_FIELDS, carrier._NATIVE_KINDS
    limits = (carrier.TS_LIMIT, carrier.MAX_ATTEMPT, carrier.PARENT_SCAN)
    assert native.read_records(plain, *keys, limits, 0, 0) is not None
    for make in ODD:
        assert native.read_records([*plain, make()], *keys, limits, 0, 0) is None, make()
    duplicate = [_start("a", 1.0), _start("a", 1.5)]
    assert native.read_records(duplicate, *keys, limits, 0, 0) is None
    with pytest.raises(TypeError):
        native.read_records(tuple(plain), *keys, limits, 0, 0)
    with pytest.raises(ValueError):
        native.read_records(plain, keys[0][:3], keys[1], limits, 0, 0)


@needs_native
def test_a_long_walk_to_a_parent_goes_to_python(monkeypatch) -> None:
    """Spans ended under one still open leave the native pass's open list; a walk past
    many of them to infer a parent sends the carrier to the bounded Python scan, and
    the result is the same."""
    records = [_start("keeper", 10.0)]
    records += [_start(f"c{index}", 60.0) for index in range(3000)]
    records.append(_start("tail", 60.0))
    records += [_end(f"c{index}", 61.0) for index in range(3000)]
    records.append(_event(20.0))  # its parent: "keeper", past 3,000 ended spans
    taken = _assert_same_both_ways([records], monkeypatch)
    assert taken == 0
