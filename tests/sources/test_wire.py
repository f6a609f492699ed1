"""Frames across a process boundary: written as Arrow files, read back and checked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from slime_trace_widget.frames.build import INFERRED_TEXT
from slime_trace_widget.sources.dumps.wire import (
    WireError,
    _decode_column,
    read_frames,
    read_table,
    table_file,
    write_frames,
    write_table,
)


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


def test_a_column_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    frames = build_frames(make_demo_samples(4))
    frames.samples["reward"] = frames.samples["reward"].astype("float32")
    write_frames(frames, str(tmp_path))
    with pytest.raises(WireError, match=r"samples\.reward: expected double, got float"):
        read_frames(str(tmp_path))


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
    assert_same_frames(read_frames(str(tmp_path), mapped=True), frames)
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
    reference = build_frames(make_demo_samples(2)).span_core
    starts = pa.chunked_array([pa.array(np.linspace(1.0, 2.0, 1000))])
    decoded = _decode_column(starts, reference["start"])
    assert np.shares_memory(decoded, np.frombuffer(starts.chunk(0).buffers()[1], np.float64))
    two = pa.chunked_array([starts.chunk(0).slice(0, 400), starts.chunk(0).slice(400)])
    assert np.array_equal(_decode_column(two, reference["start"]), decoded)


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


def test_frames_through_shared_memory_and_through_disk_are_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With room, workers write into SHARED_MEMORY and the caller maps the files (which
    are gone before the columns are used); without, the temporary folder on disk."""
    from slime_trace_widget.sources import loading

    shared = tmp_path / "shm"
    shared.mkdir()
    monkeypatch.setattr(loading, "SHARED_MEMORY", str(shared))
    path = FIXTURES / "small.pt"
    seen = []
    real_mkdtemp = loading.tempfile.mkdtemp
    monkeypatch.setattr(loading.tempfile, "mkdtemp",
                        lambda **kwargs: seen.append(kwargs["dir"]) or real_mkdtemp(**kwargs))
    mapped = loading.load_frames(path)
    monkeypatch.setattr(loading, "available_memory", lambda: 1024)  # no room: on disk
    on_disk = loading.load_frames(path)
    assert seen == [str(shared), None] and list(shared.iterdir()) == []
    assert_same_frames(mapped, on_disk)
    assert_same_frames(mapped, build_frames(loading.load_dump(path)))
