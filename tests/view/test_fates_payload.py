"""The samples' fates and the rollouts' ledger in the payload: decoded back, they must
say what ``analysis.sample_fates``, ``signal_ledger`` and ``tail_price`` say, and put
the 90%-finished instant where the renderer draws each rollout's rows."""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget import TraceTimeline
from slime_trace_widget.answers.ledger import FATES, sample_fates, signal_ledger
from slime_trace_widget.answers.tail import tail_price
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.contract import CONTRACT, FATE_NONE
from slime_trace_widget.view.page.htmlpage import MAGIC
from slime_trace_widget.view.page.snapshot import data_blocks
from slime_trace_widget.view.payload import encode
from tests.view.test_payload import decode

FIXTURES = Path(__file__).parents[1] / "fixtures"
TWO = ("small.pt", "edge_open_span.pt")


@pytest.fixture(scope="module")
def small():
    return load_frames(FIXTURES / "small.pt")


@pytest.fixture(scope="module")
def two():
    return load_frames([FIXTURES / name for name in TWO])


def _fates(view) -> list[str]:
    return [FATES[code] for code in decode(view.payload)["smp_fate"]]


def test_the_fate_codes_fit_their_column() -> None:
    assert CONTRACT["columns"]["smp_fate"] == "u1"
    assert FATE_NONE == CONTRACT["fate_none"] >= len(FATES)


def test_each_sample_carries_its_fate(small) -> None:
    view = encode(small)
    assert _fates(view) == [str(f) for f in sample_fates(small).loc[view.sample_rows]]
    # small.pt: statuses completed 6, truncated 2; its groups' rewards vary
    assert _fates(view).count("truncated") == 2 and _fates(view).count("signal") == 6


def test_ledger_is_signal_ledger_and_tail_price(small) -> None:
    meta = encode(small).payload["meta"]
    ledger = meta["ledger"]
    row, price = signal_ledger(small).loc[0], tail_price(small).loc[0]
    assert ledger["rollout"] == [0]
    assert ledger["samples"] == [[int(row[f"samples_{fate}"]) for fate in FATES]]
    assert ledger["seconds"][0] == pytest.approx([row[f"seconds_{fate}"] for fate in FATES])
    assert ledger["shares"][0] == pytest.approx([row[f"share_{fate}"] for fate in FATES])
    for column in ("finished_50", "finished_90", "finished_99", "step_s"):
        assert ledger[column] == pytest.approx([price[column]])
    start = small.samples["start"].min()
    assert ledger["finished_90_at"] == pytest.approx([start + price["finished_90"]], abs=1e-6)
    assert ledger["offset"] == [0.0]
    json.dumps(meta, allow_nan=False)  # the snapshot's header refuses NaN


@pytest.mark.parametrize("align", ["global", "rollout"])
def test_the_instant_falls_over_its_rollouts_rows(two, align: str) -> None:
    """Where the renderer draws the instant (absolute time less t0 and the rollout's
    offset) is the rollout's first start plus ``finished_90`` on the rows' own axis."""
    view = encode(two, align=align)
    meta, cols = view.payload["meta"], decode(view.payload)
    ledger, price = meta["ledger"], tail_price(two)
    assert ledger["rollout"] == [0, 1]
    for k, dump in enumerate(ledger["rollout"]):
        mine = cols["smp_rollout"] == dump
        drawn_start = float(np.nanmin(cols["smp_start"][mine]))
        assert cols["smp_offset"][mine] == pytest.approx(ledger["offset"][k], abs=1e-3)
        drawn = ledger["finished_90_at"][k] - meta["t0"] - ledger["offset"][k]
        expected = price.loc[two.rollout_ids[dump], "finished_90"]
        assert drawn - drawn_start == pytest.approx(expected, abs=1e-3)
        if align == "rollout":
            assert drawn == pytest.approx(expected, abs=1e-3)  # each rollout from its own 0


def test_a_filtered_view_keeps_whole_rollouts_and_only_those_shown(two) -> None:
    truncated = two.samples[two.samples["status"] == "truncated"]
    first = truncated[truncated["dump"] == 0]
    view = encode(two, samples=first)
    ledger = view.payload["meta"]["ledger"]
    assert ledger["rollout"] == [0]
    assert sum(ledger["samples"][0]) == int((two.samples["dump"] == 0).sum())
    assert set(_fates(view)) == {"truncated"}


def test_no_samples_no_ledger(small) -> None:
    view = encode(small, samples=small.samples.iloc[:0])
    assert "ledger" not in view.payload["meta"]
    assert decode(view.payload)["smp_fate"].size == 0


def test_untraced_samples_keep_a_fate_and_finite_json() -> None:
    frames = load_frames(FIXTURES / "edge_untraced_mixed.pt")
    view = encode(frames)
    codes = decode(view.payload)["smp_fate"]
    assert len(codes) == len(frames.samples) and (codes < len(FATES)).all()
    text = json.dumps(view.payload["meta"]["ledger"], allow_nan=False)
    assert "NaN" not in text


def test_widget_and_page_carry_the_fates(small) -> None:
    timeline = TraceTimeline(small)
    assert timeline.payload["meta"]["ledger"] == encode(small).payload["meta"]["ledger"]
    assert len(decode(timeline.payload)["smp_fate"]) == len(small.samples)
    blocks = data_blocks(small, encode(small), view_state={"color_by": "fate"})
    data = gzip.decompress(blocks.data)
    assert data[:4] == MAGIC
    (length,) = struct.unpack("<I", data[4:8])
    header = json.loads(data[8:8 + length])
    assert header["payload"]["meta"]["ledger"] == timeline.payload["meta"]["ledger"]
    assert "smp_fate" in header["payload"]["buffers"]
    assert header["state"]["view_state"] == {"color_by": "fate"}
