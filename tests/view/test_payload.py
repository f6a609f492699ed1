"""Payload encoding: decoded back in Python, it must say what the frames say."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.payload import (
    CLIP_SHIFT,
    COLUMN_DTYPES,
    FLAG_OPEN,
    FLAG_VIRTUAL,
    encode,
)

FIXTURES = Path(__file__).parents[1] / "fixtures"


#: The item time columns, each with the column naming its item's payload sample.
ITEM_TIMES = {"span_start": "span_sample", "span_end": "span_sample", "ev_ts": "ev_sample"}


def decode(payload: dict) -> dict[str, np.ndarray]:
    """The Python twin of js/src/data/decode.js: typed arrays from little-endian bytes,
    item times as float64 seconds from t0 (their float32 offset plus their sample's
    ``smp_base``; a payload without it counts from 0)."""
    cols = {name: np.frombuffer(buf, dtype="<" + payload["meta"]["columns"][name])
            for name, buf in payload["buffers"].items()}
    bases = cols.get("smp_base", np.zeros(0))
    for name, owner in ITEM_TIMES.items():
        cols[name] = _from_base(cols[name], cols[owner], bases)
    span_sample = cols["span_sample"]
    seg_span = cols["seg_span"].astype(np.int64)
    seg_sample = np.where(seg_span < len(span_sample),
                          span_sample[np.minimum(seg_span, max(len(span_sample) - 1, 0))]
                          if len(span_sample) else len(bases), len(bases))
    for name in ("seg_start", "seg_end"):
        cols[name] = _from_base(cols[name], seg_sample, bases)
    return cols


def _from_base(offsets: np.ndarray, owners: np.ndarray, bases: np.ndarray) -> np.ndarray:
    """Offsets plus their sample's base, float64 (0 for an owner past the last sample)."""
    owners = owners.astype(np.int64)
    known = owners < len(bases)
    base = np.where(known, bases[np.where(known, owners, 0)] if len(bases) else 0.0, 0.0)
    return offsets.astype(np.float64) + base


@pytest.fixture(scope="module")
def frames():
    return load_frames(FIXTURES / "edge_open_span.pt")


def test_round_trip_spans(frames) -> None:
    view = encode(frames)
    cols = decode(view.payload)
    meta = view.payload["meta"]
    json.dumps(meta, allow_nan=False)  # the JSON part is plain JSON
    assert set(view.payload["buffers"]) == set(COLUMN_DTYPES)
    core = frames.span_core.loc[view.span_index]
    assert not core["pd_detail"].any()
    assert len(view.span_index) == int((~frames.span_core["pd_detail"]).sum())
    names = np.array(meta["names"], dtype=object)[cols["span_name"]]
    assert (names == core["name"].astype(str).to_numpy()).all()
    np.testing.assert_allclose(cols["span_start"] + meta["t0"], core["start"], atol=1e-3)
    np.testing.assert_allclose(cols["span_end"] + meta["t0"], core["display_end"], atol=1e-3)
    np.testing.assert_array_equal(cols["span_dur"], core["duration"].to_numpy(np.float32))
    sample_of_span = np.asarray(meta["samples"]["row"])[cols["span_sample"]]
    assert (sample_of_span == core["sample_row"].to_numpy()).all()
    assert (cols["span_lane"] == core["lane"].to_numpy()).all()
    is_open = (cols["span_flags"] & FLAG_OPEN) > 0
    assert (is_open == (core["state"] == "open").to_numpy()).all()
    assert is_open.sum() == 9
    assert ((cols["span_flags"] & FLAG_VIRTUAL) > 0).sum() == int(core["virtual"].sum())
    clip = (cols["span_flags"] >> CLIP_SHIFT) & 3
    assert (clip[is_open] > 0).all() and (clip[~is_open] == 0).all()
    # sorted by sample, lane, start: what the renderer's binary search relies on
    keys = np.lexsort((cols["span_start"], cols["span_lane"], cols["span_sample"]))
    assert (keys == np.arange(len(keys))).all()
    # parents point at the parent's payload position
    parents = cols["span_parent"]
    has = parents >= 0
    assert (view.span_index[parents[has]] == core["parent_index"].to_numpy()[has]).all()


def test_segments_and_events(frames) -> None:
    view = encode(frames)
    cols = decode(view.payload)
    owners = cols["seg_span"]
    assert len(owners) == len(frames.segments)
    assert ((cols["span_flags"][owners] & FLAG_VIRTUAL) > 0).all()
    events = frames.event_core.loc[view.event_index]
    np.testing.assert_allclose(cols["ev_ts"] + view.payload["meta"]["t0"], events["ts"],
                               atol=1e-3)
    assert len(view.event_index) == len(frames.event_core)


def test_bytes_per_span_within_budget(frames) -> None:
    view = encode(frames)
    span_bytes = sum(len(b) for k, b in view.payload["buffers"].items() if k.startswith("span_"))
    assert span_bytes / len(view.span_index) <= 26  # 4 of them the recorded duration


def test_sample_filter_limits_rows_and_spans(frames) -> None:
    chosen = frames.samples[frames.samples["status"] == "truncated"]
    view = encode(frames, samples=chosen)
    assert view.sample_rows.tolist() == chosen.index.tolist()
    assert view.payload["meta"]["n_samples_total"] == len(frames.samples)
    assert set(frames.span_core.loc[view.span_index, "sample_row"]) <= set(chosen.index)


def test_span_filter_limits_rows_to_owners(frames) -> None:
    long = frames.spans[(frames.spans["duration"] > 10) & ~frames.spans["virtual"]]
    view = encode(frames, spans=long)
    assert sorted(view.span_index.tolist()) == sorted(long.index.tolist())
    assert view.sample_rows.tolist() == sorted(long["sample_row"].unique().tolist())
    cols = decode(view.payload)
    parents = cols["span_parent"]
    assert ((parents == -1) | (parents < len(view.span_index))).all()


def test_event_filter_sends_exactly_those_events(frames) -> None:
    """``events`` names the events, whether or not their parent span is sent."""
    chosen = frames.events.iloc[::3]
    long = frames.spans[(frames.spans["duration"] > 10) & ~frames.spans["virtual"]]
    view = encode(frames, samples=frames.samples, spans=long, events=chosen)
    assert sorted(view.event_index.tolist()) == sorted(chosen.index.tolist())
    parents = frames.event_core.loc[view.event_index, "parent_index"]
    assert not parents.isin(view.span_index).all(), "some sent events' parents are not sent"
    assert (decode(view.payload)["ev_parent"] >= -1).all()


def test_explicitly_chosen_pd_spans_are_drawn(frames) -> None:
    pd_spans = frames.spans[frames.spans["name"] == "sglang_pd_decode_forward"]
    view = encode(frames, spans=pd_spans)
    assert len(view.span_index) == len(pd_spans)


def test_dumps_of_one_rollout_id_get_labels_that_tell_them_apart(tmp_path) -> None:
    """The same step of two runs read "rollout 0" twice: in rows, markers and the diff's
    A and B, the two could not be told apart."""
    import shutil

    paths = []
    for run in ("runA", "runB"):
        (tmp_path / run).mkdir()
        paths.append(tmp_path / run / "rollout_0.pt")
        shutil.copy(FIXTURES / "small.pt", paths[-1])
    frames = load_frames([*paths, FIXTURES / "legacy_v1_pd.pt"])
    assert encode(frames).payload["meta"]["rollouts"] == [
        "rollout 0 (runA/rollout_0.pt)", "rollout 0 (runB/rollout_0.pt)", "rollout 3"]


def test_rollout_alignment_offsets() -> None:
    both = load_frames([FIXTURES / "small.pt", FIXTURES / "legacy_v1_pd.pt"])
    view = encode(both, align="rollout")
    cols = decode(view.payload)
    assert view.payload["meta"]["rollouts"] == ["rollout 0", "rollout 3"]
    offsets = cols["smp_offset"]
    rollout = cols["smp_rollout"]
    assert offsets[rollout == 0].max() == pytest.approx(0.0)
    assert offsets[rollout == 1].min() > 0
    starts = cols["smp_start"]
    assert starts[rollout == 1].min() == pytest.approx(0.0, abs=1e-3)
    # spans, segments and events move with their sample: all drawn near 0 in both rollouts
    span_rollout = rollout[cols["span_sample"]]
    for group in (0, 1):
        assert cols["span_start"][span_rollout == group].min() == pytest.approx(0.0, abs=1e-3)
        assert cols["ev_ts"][rollout[cols["ev_sample"]] == group].max() < 60
    assert cols["seg_start"].max() < 60
    spans = both.span_core.loc[view.span_index]
    absolute = cols["span_start"] + view.payload["meta"]["t0"] + offsets[cols["span_sample"]]
    np.testing.assert_allclose(absolute, spans["start"], atol=0.05)


def test_empty_dump_encodes() -> None:
    view = encode(load_frames(FIXTURES / "edge_empty.pt"))
    assert sum(len(b) for b in view.payload["buffers"].values()) == 0
    assert view.payload["meta"]["n_samples_total"] == 0


def test_a_dataset_from_before_engine_traces_encodes_without_engine_spans(
        frames, tmp_path: Path) -> None:
    """An older run dataset's spans and events have no ``origin`` column: read back,
    every one is the dump's."""
    import pyarrow.parquet as pq

    from slime_trace_widget.sources.dataset import convert, open_dataset

    convert([FIXTURES / "edge_open_span.pt"], tmp_path, progress=False)
    written = [*tmp_path.glob("spans/*/*.parquet"), *tmp_path.glob("events/*/*.parquet")]
    assert written
    for path in written:
        pq.write_table(pq.read_table(path).drop_columns(["origin"]), path)
    older = open_dataset(tmp_path)
    view, current = encode(older), encode(frames)
    assert "engine_phases" not in view.payload["meta"]
    assert view.payload["buffers"] == current.payload["buffers"]  # no span was the engine's


def _with_load(frames, times: list[float]):
    """``frames`` with scrapes of two engines at ``times`` (seconds from the frames' t0):
    running requests 1, 2, 3, ... on engine-a and twice that on engine-b."""
    from dataclasses import replace

    from slime_trace_widget.frames.engine_load import engine_load_frame

    rows = [(engine, frames.t0 + t, (k + 1) * scale)
            for engine, scale in (("engine-b", 2.0), ("engine-a", 1.0))
            for k, t in enumerate(times)]
    engine, ts, value = zip(*rows, strict=True)
    load = engine_load_frame(engine, ["sglang:num_running_reqs"] * len(rows), [""] * len(rows),
                             ts, value)
    return replace(frames, engine_load=load)


def test_engine_load_travels_within_the_frames_time(frames) -> None:
    span = frames.t1 - frames.t0
    loaded = _with_load(frames, [-30.0, -10.0, 0.5, span / 2, span + 10.0])
    view = encode(loaded)
    meta, cols = view.payload["meta"], decode(view.payload)
    assert meta["load_engines"] == ["engine-a", "engine-b"]
    # per engine: the last scrape before t0 (it holds at the start), those within; not after
    assert cols["load_engine"].tolist() == [0, 0, 0, 1, 1, 1]
    assert cols["load_track"].tolist() == [0] * 6  # "running", the contract's first track
    np.testing.assert_allclose(cols["load_ts"], [-10.0, 0.5, span / 2] * 2, atol=1e-3)
    assert cols["load_value"].tolist() == [2.0, 3.0, 4.0, 4.0, 6.0, 8.0]
    keys = np.lexsort((cols["load_ts"], cols["load_track"], cols["load_engine"]))
    assert (keys == np.arange(len(keys))).all()
    # a filtered view keeps the whole load: it is the engines', not the rows'
    some = encode(loaded, samples=frames.samples.iloc[:1])
    assert some.payload["buffers"]["load_value"] == view.payload["buffers"]["load_value"]


def test_no_engine_load_no_tracks(frames) -> None:
    view = encode(frames)
    assert "load_engines" not in view.payload["meta"]
    assert all(view.payload["buffers"][name] == b"" for name in
               ("load_engine", "load_track", "load_ts", "load_value"))
    # scrapes of metrics no track reads give no track either
    from dataclasses import replace

    from slime_trace_widget.frames.engine_load import engine_load_frame
    other = replace(frames, engine_load=engine_load_frame(
        ["e"], ["sglang:cache_hit_rate"], [""], [frames.t0 + 1.0], [0.5]))
    assert "load_engines" not in encode(other).payload["meta"]


def test_rollout_alignment_sends_no_load(frames) -> None:
    loaded = _with_load(frames, [0.5, 1.5])
    assert "load_engines" in encode(loaded).payload["meta"]
    aligned = encode(loaded, align="rollout")
    assert "load_engines" not in aligned.payload["meta"]
    assert aligned.payload["buffers"]["load_ts"] == b""
