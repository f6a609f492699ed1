"""Payload times keep their precision however far apart the timestamps lie.

Item times travel as float32 seconds from their sample's float64 ``smp_base``;
decoded (``decode``, the twin of js/src/data/decode.js) they are float64 seconds
from ``t0``. One stray clock in an epoch-stamped dump (a ``time.monotonic()``
stamp makes ``t0`` about 1.8e9 s early), dumps days apart in one view, or a stray
record inside a sample must leave every span's duration exact.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.payload import encode
from tests.view.test_payload import decode

#: 2026-01-01 in epoch seconds: the clock of the dumps' ordinary records.
EPOCH = 1_767_225_600.0
#: What ``time.monotonic()`` gives a few hours after boot: a stray clock.
MONOTONIC = 12_345.6
#: Spans (start, end) of each ordinary sample, seconds from its first record.
STEPS = ((0.0, 0.5), (1.0, 3.0), (3.2, 10.2))
#: Durations of the spans of a dump of the multi-dump view, seconds.
SHORT_STEPS = (0.003, 0.007, 0.012, 0.020)
FIVE_DAYS = 5 * 86_400.0


def traced_sample(index: int, records: list[dict[str, Any]]) -> dict[str, Any]:
    head = {"trace_id": f"t{index}", "sample_id": index, "group_id": 0, "attempt": 0}
    return {"index": index, "group_index": 0, "status": "completed", "reward": 1.0,
            "metadata": {"source": "s"},
            "trace": {"version": 1, **head, "events": [{**head, **r} for r in records]}}


def span(name: str, start: float, end: float, span_id: str) -> list[dict[str, Any]]:
    return [{"type": "span_start", "name": name, "ts": start, "span_id": span_id},
            {"type": "span_end", "name": name, "ts": end, "span_id": span_id}]


def steps_of(index: int, first: float) -> list[dict[str, Any]]:
    return [r for j, (a, b) in enumerate(STEPS)
            for r in span(f"step{j}", first + a, first + b, f"{index}-{j}")]


def stray_clock_dump(path: Path) -> Path:
    """Four epoch-stamped samples with spans of 0.5, 2 and 7 s, and a fifth whose one
    event was stamped with ``time.monotonic()``."""
    samples = [traced_sample(i, steps_of(i, EPOCH + i * 13.7)) for i in range(4)]
    samples.append(traced_sample(9, [{"type": "event", "name": "monotonic_stamp",
                                      "ts": MONOTONIC}]))
    save_dump(path, samples, rollout_id=1)
    return path


def stray_record_in_a_sample_dump(path: Path) -> Path:
    """The stray ``time.monotonic()`` event inside a sample with ordinary spans."""
    records = [*steps_of(0, EPOCH), {"type": "event", "name": "monotonic_stamp",
                                     "ts": MONOTONIC}]
    save_dump(path, [traced_sample(0, records), traced_sample(1, steps_of(1, EPOCH + 20))],
              rollout_id=1)
    return path


def days_apart_dumps(folder: Path) -> list[Path]:
    """Two dumps of one sample each, five days apart, with spans of 3 to 20 ms."""
    paths = []
    for k, (first, rollout_id) in enumerate(((EPOCH, 0), (EPOCH + FIVE_DAYS, 500))):
        records = [r for j, length in enumerate(SHORT_STEPS)
                   for r in span("pd_step", first + j * 0.1, first + j * 0.1 + length, f"{j}")]
        path = folder / f"rollout_{k}.pt"
        save_dump(path, [traced_sample(0, records)], rollout_id=rollout_id)
        paths.append(path)
    return paths


def decoded_spans(frames: Any) -> tuple[dict[str, np.ndarray], Any, float]:
    """The decoded payload, the frames' spans in payload order, and ``t0``."""
    view = encode(frames)
    return decode(view.payload), frames.span_core.loc[view.span_index], view.payload["meta"]["t0"]


def assert_exact_durations(frames: Any) -> None:
    """Every span's decoded duration is its own to 1 microsecond, relative, and its
    start its own to 10 microseconds."""
    cols, spans, t0 = decoded_spans(frames)
    true = (spans["display_end"] - spans["start"]).to_numpy()
    shown = cols["span_end"] - cols["span_start"]
    assert (true > 0).all()
    np.testing.assert_allclose(shown, true, rtol=1e-6, atol=0)
    np.testing.assert_allclose(cols["span_start"], spans["start"].to_numpy() - t0, rtol=0,
                               atol=1e-5)


def test_a_stray_clock_leaves_every_duration_exact(tmp_path: Path) -> None:
    frames = load_frames(stray_clock_dump(tmp_path / "clock.pt"))
    assert frames.t0 == MONOTONIC
    assert_exact_durations(frames)
    cols, _, _ = decoded_spans(frames)
    assert sorted(set(np.round(cols["span_end"] - cols["span_start"], 6))) == [0.5, 2.0, 7.0]


def test_dumps_days_apart_leave_every_duration_exact(tmp_path: Path) -> None:
    frames = load_frames(days_apart_dumps(tmp_path))
    assert frames.t1 - frames.t0 > FIVE_DAYS
    assert_exact_durations(frames)
    cols, _, _ = decoded_spans(frames)
    lengths = np.round((cols["span_end"] - cols["span_start"]) * 1000, 3)  # ms, to 1 us
    assert lengths.tolist() == [1000 * s for s in SHORT_STEPS] * 2


def test_a_stray_record_inside_a_sample_costs_only_itself(tmp_path: Path) -> None:
    frames = load_frames(stray_record_in_a_sample_dump(tmp_path / "inside.pt"))
    assert frames.t0 == MONOTONIC
    assert_exact_durations(frames)
    # the sample's items count from its first ordinary timestamp, not from the stray one
    cols = decode(encode(frames).payload)
    assert cols["smp_start"][0] == 0.0
    assert cols["smp_base"].tolist() == [EPOCH - MONOTONIC, EPOCH + 20 - MONOTONIC]


def test_a_stray_span_as_half_of_a_sample_costs_only_itself(tmp_path: Path) -> None:
    """A stray span brings two stray stamps: beside one short ordinary span they are half
    the sample, and its median falls between the clocks; the ordinary span keeps its
    precision all the same (its base comes from the view's median)."""
    records = [*span("stray", MONOTONIC, MONOTONIC + 0.001, "m"),
               *span("short", EPOCH + 5, EPOCH + 5.0004, "e")]
    path = tmp_path / "half.pt"
    save_dump(path, [traced_sample(0, records), traced_sample(1, steps_of(1, EPOCH))],
              rollout_id=1)
    frames = load_frames(path)
    cols, spans, t0 = decoded_spans(frames)
    short = (spans["name"] == "short").to_numpy()
    # 1 us: float64 seconds from a t0 1.8e9 s away hold 0.24 us
    assert cols["span_end"][short] - cols["span_start"][short] == pytest.approx(0.0004, abs=1e-6)
    np.testing.assert_allclose(cols["span_start"][short], EPOCH + 5 - t0, rtol=0, atol=1e-5)
    assert cols["smp_base"][0] == EPOCH + 5 - t0


def test_an_ordinary_sample_counts_from_its_start(tmp_path: Path) -> None:
    payload = encode(load_frames(stray_clock_dump(tmp_path / "clock.pt"))).payload
    cols = decode(payload)
    np.testing.assert_array_equal(cols["smp_base"], cols["smp_start"])
    for name in ("span_start", "ev_ts"):
        assert np.frombuffer(payload["buffers"][name], "<f4").min() == 0, name


def test_item_times_travel_as_small_float32_offsets(tmp_path: Path) -> None:
    """What travels is float32 seconds within the sample, whatever t0 is."""
    view = encode(load_frames(stray_clock_dump(tmp_path / "clock.pt")))
    buffers = view.payload["buffers"]
    for name in ("span_start", "span_end", "ev_ts"):
        offsets = np.frombuffer(buffers[name], "<f4")
        assert len(offsets) and np.abs(offsets).max() < 20, name
    bases = np.frombuffer(buffers["smp_base"], "<f8")
    assert bases.max() > EPOCH - MONOTONIC - 1


def test_sample_times_are_float64(tmp_path: Path) -> None:
    frames = load_frames(stray_clock_dump(tmp_path / "clock.pt"))
    view = encode(frames)
    cols = decode(view.payload)
    samples = frames.samples.iloc[view.sample_rows]
    t0 = view.payload["meta"]["t0"]
    np.testing.assert_allclose(cols["smp_start"], samples["start"] - t0, rtol=0, atol=1e-6)
    np.testing.assert_allclose(cols["smp_end"] - cols["smp_start"], samples["duration"],
                               rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("align", ["global", "rollout"])
def test_segments_and_events_count_from_their_sample(tmp_path: Path, align: str) -> None:
    frames = load_frames([Path(__file__).parents[1] / "fixtures" / name
                          for name in ("small.pt", "legacy_v1_pd.pt")])
    view = encode(frames, align=align)
    cols, meta = decode(view.payload), view.payload["meta"]
    offsets = cols["smp_offset"]
    events = frames.event_core.loc[view.event_index]
    np.testing.assert_allclose(cols["ev_ts"] + offsets[cols["ev_sample"]] + meta["t0"],
                               events["ts"], rtol=0, atol=1e-5)
    segments = frames.segments[frames.segments["span_index"].isin(view.span_index)]
    owner_sample = cols["span_sample"][cols["seg_span"]]
    got = np.sort(cols["seg_start"] + offsets[owner_sample] + meta["t0"])
    np.testing.assert_allclose(got, np.sort(segments["start"].to_numpy()), rtol=0, atol=1e-5)
