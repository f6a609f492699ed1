"""Frames across a process boundary: written as Arrow files, read back and checked."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.core_frames import (
    INFERRED_TEXT,
    _decode_column,
    decode_table,
)
from slime_trace_widget.frames.frame_encoding import encode_table
from slime_trace_widget.sources.dumps.wire import (
    WireError,
    read_frames,
    read_table,
    table_file,
    write_frames,
    write_table,
)
from slime_trace_widget.tables.attr_format import JSON_FIELD, NONE_KEYS, OVERFLOW
from slime_trace_widget.tables.build import build_tables
from slime_trace_widget.tables.core_tables import CORE_SCHEMA, CORE_TABLES, STATES
from tests.tables.test_attr_columns import _ipc_bytes


def assert_same_frames(one, other) -> None:
    for name in ("samples", "span_core", "event_core", "segments"):
        pd.testing.assert_frame_equal(getattr(one, name), getattr(other, name),
                                      check_categorical=False)
    for frame, column in (("spans", "start_attrs"), ("spans", "end_attrs"), ("events", "attrs")):
        # repr: NaN values compare unequal to themselves
        assert repr(getattr(one, frame)[column].tolist()) == \
            repr(getattr(other, frame)[column].tolist())
    assert (one.paths, one.rollout_ids, one.warnings) == (other.paths, other.rollout_ids,
                                                         other.warnings)


def test_frames_round_trip(tmp_path: Path) -> None:
    frames = build_frames(make_demo_samples(24, seed=3))
    write_frames(frames, str(tmp_path))
    assert_same_frames(read_frames(str(tmp_path)), frames)


def test_big_ids_and_missing_ones_come_back_exact(tmp_path: Path) -> None:
    samples = make_demo_samples(3)
    samples[0]["index"], samples[1]["index"] = 2**60 + 1, None
    samples[1].pop("trace")  # no carrier to take the index from either
    frames = build_frames(samples)
    write_frames(frames, str(tmp_path))
    back = read_frames(str(tmp_path)).samples["sample_index"]
    assert back.iloc[0] == 2**60 + 1 and pd.isna(back.iloc[1]) and str(back.dtype) == "Int64"


def test_a_reward_json_cannot_write_crosses_as_json_safe_makes_it(tmp_path: Path) -> None:
    """A reward past float range stays whole in ``reward_detail``; one of more than
    4,300 digits, which ``json.dumps`` refuses, failed the whole dump in a worker."""
    samples = make_demo_samples(3)
    samples[0]["reward"], samples[1]["reward"] = 10**400, 10**5000
    frames = build_frames(samples)
    write_frames(frames, str(tmp_path))
    back = read_frames(str(tmp_path)).samples["reward_detail"].tolist()
    assert back[0] == 10**400 and back[1] == "<int of 16610 bits>" and back[2] is None
    assert frames.samples["reward_detail"].tolist() == back


def write_changed(frames, directory: Path, name: str, column: str, change) -> None:
    """``frames`` written as a worker writes them, then core table ``name`` again with
    ``column`` made ``change(column)``."""
    write_frames(frames, str(directory))
    table = getattr(frames.tables, name)
    position = table.schema.get_field_index(column)
    write_table(table.set_column(position, column, change(table.column(column))),
                table_file(str(directory), name))


def test_a_column_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    frames = build_frames(make_demo_samples(4))
    write_changed(frames, tmp_path, "samples", "reward", lambda c: c.cast(pa.float32()))
    with pytest.raises(WireError, match=r"samples\.reward: expected double, got float"):
        read_frames(str(tmp_path))


def write_with_extra_text(frames, directory: Path, name: str, column: str, rows: dict,
                          json_field: bool = False) -> None:
    """``frames`` written as a worker writes them, then attribute table ``name`` again
    with a text ``column`` holding ``rows`` (position: text), null elsewhere."""
    write_frames(frames, str(directory))
    table = getattr(frames, name).table
    values = [rows.get(position) for position in range(table.num_rows)]
    field = pa.field(column, pa.string(), metadata={JSON_FIELD: b"1"} if json_field else None)
    write_table(table.append_column(field, pa.array(values, pa.string())),
                table_file(str(directory), name))


@pytest.mark.parametrize(("column", "text", "json_field", "problem"), [
    (OVERFLOW, '{"cut": ', False, r"span_end_attrs\._overflow: a row is not JSON"),
    (OVERFLOW, "[1, 2]", False, r"span_end_attrs\._overflow: row 1 is not an object"),
    (NONE_KEYS, '{"a": null}', False, r"_none_keys: row 1 is not a list of text"),
    (NONE_KEYS, '["a", 3]', False, r"_none_keys: row 1 is not a list of text"),
    ("tool_args", "[" * 100_000, True, r"tool_args: a row is not JSON \(RecursionError\)"),
    ("tool_args", "NaN-ish", True, r"tool_args: a row is not JSON \(JSONDecodeError\)"),
])
def test_attribute_json_a_view_could_not_read_is_refused(
        tmp_path: Path, column: str, text: str, json_field: bool, problem: str) -> None:
    """A worker's JSON columns are read back by the views: text that is not JSON, or
    not of the shape a view merges into a row's dict, is the file's fault (WireError),
    not a TypeError when the spans are first touched."""
    frames = build_frames(make_demo_samples(4))
    write_with_extra_text(frames, tmp_path, "span_end_attrs", column,
                          {0: '["fine"]' if column == NONE_KEYS else '{"x": 1}', 1: text},
                          json_field)
    with pytest.raises(WireError, match=problem):
        read_frames(str(tmp_path))


def test_attribute_json_of_the_right_shape_reads_into_the_dicts(tmp_path: Path) -> None:
    frames = build_frames(make_demo_samples(4))
    write_with_extra_text(frames, tmp_path, "event_attrs", OVERFLOW, {2: '{"late": [1, 2]}'})
    back = read_frames(str(tmp_path)).events["attrs"].tolist()
    assert back[2]["late"] == [1, 2]
    assert back[:2] == frames.events["attrs"].tolist()[:2]


def test_a_state_outside_its_vocabulary_is_refused(tmp_path: Path) -> None:
    frames = build_frames(make_demo_samples(4))
    write_changed(frames, tmp_path, "span_core", "state", lambda c: pa.DictionaryArray.from_arrays(
        c.chunk(0).indices, pa.array(["closed", "ajar"])))
    with pytest.raises(WireError, match=r"span_core\.state: categories .* are not of"):
        read_frames(str(tmp_path))


def test_a_vocabulary_comes_back_whole_and_in_order_whatever_the_file_held() -> None:
    spans = build_frames(make_demo_samples(1)).tables.span_core.slice(0, 3)
    held = pa.DictionaryArray.from_arrays(pa.array([0, 0, None], pa.int32()),
                                          pa.array(["open"]))
    spans = spans.set_column(spans.schema.get_field_index("state"), "state", held)
    decoded = decode_table(spans, "span_core")["state"]
    assert list(decoded.cat.categories) == list(STATES)
    assert decoded.tolist()[:2] == ["open", "open"] and pd.isna(decoded.tolist()[2])


def test_ids_cross_as_the_text_pandas_keeps_and_the_older_text_still_reads(
        tmp_path: Path) -> None:
    """Arrow-backed id columns are written as large_string, the type pandas holds
    them in, so reading them copies nothing; files with plain string text (pandas
    kept text as objects, or an older writer) read the same; a text type anywhere
    else is refused."""
    frames = build_frames(make_demo_samples(6, seed=2))
    write_frames(frames, str(tmp_path))
    written = read_table(table_file(str(tmp_path), "span_core"))
    arrow_text = isinstance(INFERRED_TEXT, pd.StringDtype) and INFERRED_TEXT.storage == "pyarrow"
    assert (written.schema.field("span_id").type == pa.large_string()) == arrow_text
    assert_same_frames(read_frames(str(tmp_path)), frames)
    as_string = written.set_column(written.schema.get_field_index("span_id"), "span_id",
                                   written.column("span_id").cast(pa.string()))
    write_table(as_string, table_file(str(tmp_path), "span_core"))
    assert_same_frames(read_frames(str(tmp_path)), frames)
    numbers = as_string.set_column(as_string.schema.get_field_index("start"), "start",
                                   as_string.column("start").cast(pa.large_string()))
    write_table(numbers, table_file(str(tmp_path), "span_core"))
    with pytest.raises(WireError, match=r"span_core\.start: expected double, got large_string"):
        read_frames(str(tmp_path))


def test_a_column_of_one_chunk_is_read_in_place() -> None:
    """A worker's file holds one batch: its columns are used where the file's
    memory map has them, not copied (several columns of this size per span table)."""
    spec = next(column for column in CORE_SCHEMA["span_core"] if column.name == "start")
    starts = pa.chunked_array([pa.array(np.linspace(1.0, 2.0, 1000))])
    decoded = _decode_column(starts, spec)
    assert np.shares_memory(decoded, np.frombuffer(starts.chunk(0).buffers()[1], np.float64))
    two = pa.chunked_array([starts.chunk(0).slice(0, 400), starts.chunk(0).slice(400)])
    assert np.array_equal(_decode_column(two, spec), decoded)


def test_meta_that_is_not_meta_is_refused(tmp_path: Path) -> None:
    write_frames(build_frames(make_demo_samples(4)), str(tmp_path))
    (tmp_path / "meta.json").write_text('{"paths": 3}')
    with pytest.raises(WireError, match=r"meta\.json"):
        read_frames(str(tmp_path))


FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.pt")
                                           if "corrupt" not in p.name))
def test_workers_read_every_fixture_as_torch_does(fixture: str) -> None:
    """Workers read zip dumps without torch (tensors as numpy arrays); the frames match
    those built from ``load_dump``, which goes through torch.load."""
    from slime_trace_widget.sources.loading import load_dump, load_frames

    path = FIXTURES / fixture
    assert_same_frames(load_frames(path), build_frames(load_dump(path)))


def test_the_workers_files_are_gone_before_the_frames_are_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers write into a temporary folder, deleted once the caller has read each
    file into memory: the frames' columns hold no file open."""
    from slime_trace_widget.sources import loading

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = FIXTURES / "small.pt"
    frames = loading.load_frames(path)
    assert list(tmp_path.iterdir()) == []
    assert_same_frames(frames, build_frames(loading.load_dump(path)))


@pytest.mark.parametrize("fixture", ["small.pt", "legacy_v0_pd.pt", "legacy_v1_pd.pt",
                                     "edge_weird_values.pt", "edge_open_span.pt",
                                     "edge_orphan_end.pt", "edge_untraced_mixed.pt"])
def test_the_tables_a_worker_writes_are_its_frames_encoded(fixture: str) -> None:
    """A worker writes the Arrow tables flattening builds, without pandas; the caller
    decodes them. Encoding the decoded frames gives the very tables back, column
    types and chunks included, so a worker's files and frames flattened here
    (then written) cannot drift apart."""
    from slime_trace_widget.sources.loading import load_dump

    tables = build_tables(load_dump(FIXTURES / fixture))
    frames = build_frames(load_dump(FIXTURES / fixture))
    for name in CORE_TABLES:
        built, encoded = getattr(tables, name), encode_table(getattr(frames, name), name)
        assert built.schema == encoded.schema, name
        assert _ipc_bytes(built) == _ipc_bytes(encoded), name  # NaN equal to NaN
    assert len(tables.span_core) > 0 or fixture.startswith("edge_untraced")


def test_a_frames_worker_never_imports_pandas(tmp_path: Path) -> None:
    """Importing pandas was 0.2 s of every cold load in a process that only encoded
    its DataFrames back to Arrow: neither the helper nor a frames job's child (where
    pyarrow would import it on its first list) has it, and what the job writes
    reads back as the frames flattened here."""
    import json
    import subprocess
    import sys

    from slime_trace_widget.sources.loading import load_dump

    path, out = FIXTURES / "legacy_v1_pd.pt", tmp_path / "out"
    out.mkdir()
    script = f"""
import json, os, sys
from slime_trace_widget.sources.dumps import worker
worker._prepare("frames")
real_job = worker._frames_job
def watched_job(request):  # runs in the forked child
    real_job(request)
    with open({str(tmp_path / "child.json")!r}, "w") as report:
        json.dump(sys.modules.get("pandas") is not None, report)
worker._frames_job = watched_job
verdicts = os.open({str(tmp_path / "verdicts")!r}, os.O_WRONLY | os.O_CREAT)
worker._run_in_child({{"job": "frames", "name": {str(path)!r}, "path": {str(path)!r},
                      "out": {str(out)!r}, "cpu_seconds": 600, "memory_bytes": 1 << 32}},
                     worker._Messages(verdicts))
print(json.dumps("pandas" in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600, check=True)
    assert json.loads(done.stdout.splitlines()[-1]) is False  # the helper
    assert json.loads((tmp_path / "child.json").read_text()) is False  # the job's child
    assert json.loads((tmp_path / "verdicts").read_text()) == {"ok": True}
    assert_same_frames(read_frames(str(out)), build_frames(load_dump(path)))
