"""Records that are the standard library's dicts read as the plain dicts of their items.

The safe loader makes ``OrderedDict``, ``defaultdict`` and ``Counter`` (all in its
allowlist), and a plain reading of a record (``record["type"]``, slime's viewer)
sees their spans. The flattening must too: by the native pass and by the Python
pass, a carrier of such records gives the frames of the same carrier with plain
dicts, and no ``record_not_a_dict`` warning.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, defaultdict
from pathlib import Path

import pytest
import torch

from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.tables import carrier
from slime_trace_widget.tables.build import build_tables

TRACE_ID = "t" * 32




def plain_records() -> list[dict]:
    """A small carrier: a root span, a child with attributes, an event in the child."""
    common = {"trace_id": TRACE_ID, "sample_id": 0, "group_id": 0, "attempt": 0}
    return [
        {"type": "span_start", "name": "root", "ts": 1.0, "span_id": "r", **common},
        {"type": "span_start", "name": "gen", "ts": 2.0, "span_id": "g",
         "parent_span_id": "r", "attrs": {"tokens": 12}, **common},
        {"type": "event", "name": "chunk", "ts": 2.5, "parent_span_id": "g",
         "attrs": {"n": 3}, **common},
        {"type": "span_end", "name": "gen", "ts": 3.0, "span_id": "g",
         "attrs": {"finish": "stop"}, **common},
        {"type": "span_end", "name": "root", "ts": 4.0, "span_id": "r", **common},
    ]


def as_stdlib_dicts(records: list[dict]) -> list[dict]:
    """The same records as OrderedDict, defaultdict and Counter in turn."""
    makers = (OrderedDict, lambda record: defaultdict(int, record), Counter)
    return [makers[at % len(makers)](record) for at, record in enumerate(records)]


def sample(records: list) -> dict:
    return {"index": 0, "group_index": 0, "reward": 1.0,
            "trace": {"version": 1, "trace_id": TRACE_ID, "sample_id": 0, "group_id": 0,
                      "attempt": 0, "events": records}}


def flattened(records: list) -> dict:
    tables = build_tables([sample(records)])
    return {"spans": tables.span_core.to_pydict(), "events": tables.event_core.to_pydict(),
            "start_attrs": tables.span_start_attrs.dicts(),
            "end_attrs": tables.span_end_attrs.dicts(),
            "event_attrs": tables.event_attrs.dicts(), "warnings": dict(tables.warnings)}


def test_stdlib_dict_records_flatten_as_plain_dicts(passes: str) -> None:
    plain = flattened(plain_records())
    assert plain["spans"]["name"] == ["root", "gen"] and plain["warnings"] == {}
    assert flattened(as_stdlib_dicts(plain_records())) == plain


def test_the_native_pass_reads_a_carrier_of_stdlib_dicts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Such a carrier is not left to the slower Python pass: its records are made plain
    and the native pass reads them."""
    native = carrier._native_records
    if native is None:
        pytest.skip("built without a C compiler")
    taken: list[bool] = []

    class Counting:
        @staticmethod
        def read_records(*args: object) -> object:
            read = native.read_records(*args)
            taken.append(read is not None)
            return read

    monkeypatch.setattr(carrier, "_native_records", Counting)
    out = carrier.RecordColumns()
    carrier.read_carrier(0, as_stdlib_dicts(plain_records()), out)
    assert taken[-1] is True
    assert out.span_name == ["root", "gen"] and not out.warnings


def test_other_dict_subclasses_are_still_not_records(passes: str) -> None:
    """Only the standard library's dicts are read; any other subclass (a trusted load
    can make one, with methods of its own) is skipped and counted as before."""

    class Mine(dict):
        pass

    records = plain_records()
    records[0] = Mine(records[0])
    read = flattened(records)
    assert read["warnings"]["record_not_a_dict"] == 1 and read["spans"]["name"] == ["gen"]


def test_a_dump_of_stdlib_dict_records_loads_the_frames_of_its_plain_twin(
        tmp_path: Path) -> None:
    """Through the worker (a real ``.pt``, the safe loader, the flattening): the
    reviewer's shape, an OrderedDict sample whose records are OrderedDict and
    defaultdict, one with Counter attributes."""
    plain_path, stdlib_path = tmp_path / "plain.pt", tmp_path / "stdlib.pt"
    torch.save({"rollout_id": 1, "samples": [sample(plain_records())]}, plain_path)
    records = as_stdlib_dicts(plain_records())
    records[1]["attrs"] = Counter(records[1]["attrs"])
    torch.save({"rollout_id": 1, "samples": [OrderedDict(sample(records))]}, stdlib_path)
    plain, stdlib = load_frames(plain_path), load_frames(stdlib_path)
    assert len(plain.spans) == 2 and "record_not_a_dict" not in stdlib.warnings
    assert dict(stdlib.warnings) == dict(plain.warnings)
    for view in ("spans", "events", "samples"):
        left, right = getattr(plain, view), getattr(stdlib, view)
        assert left.drop(columns=["dump"], errors="ignore").equals(
            right.drop(columns=["dump"], errors="ignore")), view
