"""TraceFrames hold the core Arrow tables: checked when made, combined and appended in
Arrow, their pandas views made once, when first read."""

from __future__ import annotations

import gc
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from slime_trace_widget.frames import model
from slime_trace_widget.frames.model import TraceFrames, combine_frames
from slime_trace_widget.sources.dumps.files import save_dump
from slime_trace_widget.sources.loading import load_dump, load_frames
from slime_trace_widget.tables.attr_columns import MAX_ATTR_COLUMNS, AttrTable
from slime_trace_widget.tables.core_tables import CORE_SCHEMA, TEXT, CoreTables, checked_table
from tests.support.frame_digest import digest_frame

FIXTURES = Path(__file__).parents[1] / "fixtures"
CORE_VIEWS = ("samples", "span_core", "event_core", "segments")


def fixture(name: str) -> TraceFrames:
    return load_frames(FIXTURES / name, trusted=True, progress=False)


# --------------------------------------------------------------------------- combining


def pandas_combined(parts: list[TraceFrames]) -> dict[str, pd.DataFrame]:
    """The core views of ``parts`` concatenated in pandas, as frames were combined before
    they held Arrow tables: renumbered, then categoricals whose categories differed
    (objects after the concatenation) made categories again. One rule is new: a column
    of ids is pandas' text when any part has it so (before, objects when another part
    had no id at all)."""
    pieces: dict[str, list[pd.DataFrame]] = {name: [] for name in CORE_VIEWS}
    rows = spans = events = dumps = 0
    for part in parts:
        pieces["samples"].append(part.samples.assign(dump=part.samples["dump"] + dumps)
                                 .set_axis(part.samples.index + rows))
        for name, offset in (("span_core", spans), ("event_core", events)):
            core = getattr(part, name)
            pieces[name].append(core.assign(
                sample_row=core["sample_row"] + rows,
                parent_index=np.where(core["parent_index"] >= 0,
                                      core["parent_index"] + spans, -1),
            ).set_axis(core.index + offset))
        pieces["segments"].append(part.segments.assign(
            span_index=part.segments["span_index"] + spans))
        rows += len(part.samples)
        spans += len(part.span_core)
        events += len(part.event_core)
        dumps += max(len(part.paths), 1)
    out = {}
    for name, frames in pieces.items():
        frame = pd.concat(frames, ignore_index=name == "segments")
        frame.index.name = frames[0].index.name
        for column in CORE_SCHEMA[name]:
            values = frame[column.name]
            if column.kind in ("codes", "vocabulary") and values.dtype != "category":
                frame[column.name] = values.astype("category")
            texts = [f[column.name].dtype for f in frames if f[column.name].dtype != object]
            if column.kind == TEXT and texts:
                frame[column.name] = values.astype(texts[0])
        out[name] = frame
    return out


@pytest.mark.parametrize("names", [
    ("small.pt", "legacy_v1_pd.pt"),  # span and event names that differ
    ("small.pt", "small.pt"),  # the same names
    ("legacy_v1_pd.pt", "edge_empty.pt", "small.pt"),  # a part without rows
    ("edge_orphan_end.pt", "small.pt"),  # ids of unmatched ends in one part only
    ("edge_weird_values.pt", "edge_untraced_mixed.pt", "rollout_eval_3.pt"),
])
def test_combining_in_arrow_gives_the_views_pandas_gave(names: tuple[str, ...]) -> None:
    parts = [fixture(name) for name in names]
    combined = combine_frames(parts)
    want = pandas_combined(parts)
    for name in CORE_VIEWS:
        assert digest_frame(getattr(combined, name)) == digest_frame(want[name]), name


def test_names_that_differ_become_the_sorted_names_used() -> None:
    small, legacy = fixture("small.pt"), fixture("legacy_v1_pd.pt")
    assert set(small.span_core["name"].cat.categories) != \
        set(legacy.span_core["name"].cat.categories)
    combined = combine_frames([small, legacy])
    names = combined.tables.span_core.column("name")
    assert names.type == pa.dictionary(pa.int32(), pa.large_string())
    used = set(small.span_core["name"].astype(str)) | set(legacy.span_core["name"].astype(str))
    assert combined.span_core["name"].cat.categories.tolist() == sorted(used)
    assert combined.span_core["name"].tolist() == [*small.span_core["name"].tolist(),
                                                   *legacy.span_core["name"].tolist()]
    # the same names (the segments' here) keep the first part's order, as objects
    same = combine_frames([small, small]).span_core["name"].cat.categories
    assert same.tolist() == small.span_core["name"].cat.categories.tolist()
    assert same.dtype == object


def test_combined_frames_point_into_their_own_rows() -> None:
    small, legacy = fixture("small.pt"), fixture("legacy_v1_pd.pt")
    combined = combine_frames([small, legacy])
    spans = combined.span_core
    tail = spans.iloc[len(small.span_core):]
    parents = tail["parent_index"].to_numpy()
    assert (parents[parents >= 0] >= len(small.span_core)).all()
    assert (tail["sample_row"] >= len(small.samples)).all()
    assert combined.samples["dump"].tolist() == [0] * len(small.samples) + \
        [1] * len(legacy.samples)


# --------------------------------------------------------------------------- views


def test_dumps_whose_attribute_keys_differ_combine_within_the_cap(tmp_path: Path) -> None:
    """Three real dumps, each with a span of 200 keys of its own: the combined frames
    keep :data:`MAX_ATTR_COLUMNS` start attribute columns, counted in the warnings, and
    each span's ``start_attrs`` still holds every key it was recorded with."""
    paths = []
    for dump in range(3):
        samples = load_dump(FIXTURES / "small.pt").samples
        record = next(r for r in samples[0]["trace"]["events"] if r["type"] == "span_start")
        record["attrs"] = {**record["attrs"], **{f"d{dump}_k{k}": k for k in range(200)}}
        paths.append(tmp_path / f"rollout_{dump}.pt")
        save_dump(paths[-1], samples, rollout_id=dump)
    alone = [load_frames(path, progress=False) for path in paths]
    keys = {key for frames in alone for key in frames.span_start_attrs.keys}
    combined = load_frames(paths, progress=False)
    assert len(combined.span_start_attrs.keys) == MAX_ATTR_COLUMNS < len(keys)
    assert combined.warnings["attr_columns_capped"] == len(keys) - MAX_ATTR_COLUMNS
    start_attrs = combined.spans["start_attrs"].tolist()
    assert start_attrs == [row for frames in alone for row in frames.spans["start_attrs"]]
    for dump in range(3):
        assert any(row and all(row.get(f"d{dump}_k{k}") == k for k in range(200))
                   for row in start_attrs)


def test_views_are_made_once_when_first_read(monkeypatch: pytest.MonkeyPatch) -> None:
    made: Counter[str] = Counter()
    decode = model.decode_checked

    def counted(table: pa.Table, name: str) -> pd.DataFrame:
        made[name] += 1
        return decode(table, name)

    monkeypatch.setattr(model, "decode_checked", counted)
    frames = combine_frames([fixture("small.pt"), fixture("legacy_v1_pd.pt")])
    assert not made  # loading and combining decode nothing
    assert frames.spans is frames.spans and frames.events is frames.events
    assert frames.samples is frames.samples
    assert made == Counter(span_core=1, event_core=1, samples=1)
    frames.span_core, frames.segments  # noqa: B018 - read again, and one more view
    assert made == Counter(span_core=1, event_core=1, samples=1, segments=1)


def test_a_view_is_made_with_the_collector_paused_and_left_as_it_was(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Making ``spans`` allocates a dict per row and then some, well past the count that
    starts a collection; none runs while its attributes are made, and the collector is
    on (or off) after as before."""
    frames = combine_frames([fixture("small.pt")] * 40)
    assert len(frames.span_core) * 2 > gc.get_threshold()[0]
    collections: list[int] = []
    during: list[int] = []
    make = model.span_attr_frame

    def watched(*args: object) -> pd.DataFrame:
        before = len(collections)
        made = make(*args)
        during.append(len(collections) - before)
        return made

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    monkeypatch.setattr(model, "span_attr_frame", watched)
    gc.callbacks.append(seen)
    try:
        assert gc.isenabled()
        frames.spans  # noqa: B018 - made here
        assert during == [0] and gc.isenabled()
        gc.disable()
        try:
            frames.events  # noqa: B018 - made here
            assert not gc.isenabled()
        finally:
            gc.enable()
    finally:
        gc.callbacks.remove(seen)


def test_frames_replace_makes_share_the_views_of_what_they_share() -> None:
    frames = fixture("small.pt")
    spans, core = frames.spans, frames.span_core
    reported = replace(frames, engine_skew=pd.DataFrame({"host": ["h"]}))
    assert reported.spans is spans and reported.span_core is core
    ends = frames.span_end_attrs
    no_ends = replace(frames, span_end_attrs=AttrTable.from_dicts([None] * len(ends)))
    assert no_ends.span_core is core
    assert no_ends.spans is not spans
    assert spans["end_attrs"].notna().any() and no_ends.spans["end_attrs"].isna().all()
    assert frames.spans is spans  # the original keeps its own


# --------------------------------------------------------------------------- checking


def _changed(table: pa.Table, column: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(column), column, values)


def test_tables_of_the_wrong_schema_are_refused_naming_table_and_column() -> None:
    tables = fixture("small.pt").tables
    spans = tables.span_core
    cases = {
        r"span_core\.start: expected double, got float":
            _changed(spans, "start", spans.column("start").cast(pa.float32())),
        r"span_core: columns .* are not":
            spans.drop_columns(["origin"]),
        r"span_core\.name: repeated categories":
            _changed(spans, "name", pa.DictionaryArray.from_arrays(
                pa.array(np.zeros(spans.num_rows, np.int32)), pa.array(["a", "a"]))),
        r"span_core\.name: codes point outside the categories":
            _changed(spans, "name", pa.DictionaryArray.from_arrays(
                pa.array(np.full(spans.num_rows, 5, np.int32)), pa.array(["a"]), safe=False)),
        r"span_core\.depth: nulls in a column that has none":
            _changed(spans, "depth", pa.array([None] * spans.num_rows, pa.int32())),
        r"span_core\.span_id: expected string, got int64":
            _changed(spans, "span_id", pa.array(np.arange(spans.num_rows))),
    }
    for message, table in cases.items():
        with pytest.raises(ValueError, match=message):
            CoreTables(tables.samples, table, tables.event_core, tables.segments)
    bad_json = _changed(tables.samples, "reward_detail",
                        pa.array(["{not json"] * tables.samples.num_rows))
    with pytest.raises(ValueError, match=r"samples\.reward_detail"):
        CoreTables(bad_json, spans, tables.event_core, tables.segments)


def test_a_checked_table_is_what_frames_hold() -> None:
    """Names in pieces come back in one; a vocabulary whole and in order; a table
    written before ``remove_sample`` existed gets it, false."""
    tables = fixture("small.pt").tables
    spans = tables.span_core
    halves = pa.concat_tables([spans.slice(0, 10), spans.slice(10)])
    assert checked_table("span_core", halves).column("name").num_chunks == 1
    state = pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(spans.num_rows, np.int8)), pa.array(["closed"]))
    checked = checked_table("span_core", _changed(spans, "state", state)).column("state")
    assert checked.type == pa.dictionary(pa.int32(), pa.string())
    assert checked.chunk(0).dictionary.to_pylist() == ["closed", "open"]
    older = checked_table("samples", tables.samples.drop_columns(["remove_sample"]))
    assert older.column("remove_sample").to_pylist() == [False] * tables.samples.num_rows
    assert checked_table("span_core", spans) is spans  # nothing to change: as it was


def test_a_changed_view_makes_frames_every_function_takes() -> None:
    """A user who scores rewards another way gets frames of the changed samples; the
    views of the tables that did not change are kept; a view that loses rows, a
    column of the wrong kind or a name that is not a core view is refused."""
    from slime_trace_widget.analysis import signal_ledger

    frames = load_frames(FIXTURES / "small.pt", progress=False)
    spans = frames.span_core
    binary = (frames.samples["reward"] >= 1).astype(float)
    pass_fail = frames.with_views(samples=frames.samples.assign(reward=binary))
    assert pass_fail.samples["reward"].tolist() == binary.tolist()
    assert pass_fail.span_core is spans
    assert not signal_ledger(pass_fail).equals(signal_ledger(frames))
    with pytest.raises(ValueError, match="keep the rows"):
        frames.with_views(samples=frames.samples.iloc[1:])
    with pytest.raises(ValueError, match="samples"):
        frames.with_views(samples=frames.samples.assign(duration="long"))
    with pytest.raises(ValueError, match="spans"):
        frames.with_views(spans=frames.spans)
