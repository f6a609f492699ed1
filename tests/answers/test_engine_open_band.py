"""The engine band of a sample whose generation span is still open draws, per phase, the
seconds ``engine_breakdown`` counts for it (``docs/engine-join.md``): the payload carries
an open span's drawn end as its end, and the band (``js/src/data/engine_partition.js``,
run in Node on the payload the widget gets) must no more clip at it than Python, for
which that end is unknown. Each case is a dump joined with its requests as the product
joins them, so the clock skew the band's spans were shifted by is the join's."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from slime_trace_widget.answers.engine import PHASE_COLUMNS, engine_breakdown
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.engine.join import join_engine
from slime_trace_widget.view.payload import encode
from tests.frames.test_frames import frames_of, rec, sample
from tests.support.engine_builder import T0, Engine, plain_slices

SOURCE = Path(__file__).parents[2] / "js" / "src" / "data"
#: float32 item times in the payload, over tens of seconds
TOLERANCE = 1e-4


def band_seconds(frames: TraceFrames) -> pd.DataFrame:
    """Per payload sample (in sample-row order), the seconds per phase the engine band of
    its collapsed row draws with every slice shown, as ``engine_breakdown``'s columns."""
    node = shutil.which("node")
    assert node, "Node is needed for the front end's tests"
    payload = encode(frames).payload
    wire = {**payload, "buffers": {name: base64.b64encode(bytes(data)).decode()
                                   for name, data in payload["buffers"].items()}}
    decoder, partition = (json.dumps((SOURCE / name).as_uri())
                          for name in ("decode.js", "engine_partition.js"))
    script = f"""
import {{ readFileSync }} from "node:fs";
import {{ decodePayload }} from {decoder};
import {{ samplePieces, secondsByCode }} from {partition};
const raw = JSON.parse(readFileSync(0, "utf8"));
for (const [name, text] of Object.entries(raw.buffers)) {{
  const bytes = Buffer.from(text, "base64");
  raw.buffers[name] = new Uint8Array(bytes).buffer;
}}
const d = decodePayload(raw);
const out = [];
for (let s = 0; s < d.nSamples; s++) {{
  const seconds = secondsByCode(d, samplePieces(d, s));
  out.push(Object.fromEntries(d.bandPhases.map((phase, i) => [phase + "_s", seconds[i + 1]])));
}}
console.log(JSON.stringify(out));
"""
    result = subprocess.run([node, "--input-type=module", "-e", script],
                            input=json.dumps(wire, default=str), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return pd.DataFrame(json.loads(result.stdout)).reindex(columns=PHASE_COLUMNS).fillna(0.0)


def _generation(rid: str, start: float, *, end: float | None = None, sid: str = "g",
                parent: str | None = None) -> list[dict]:
    """A ``sglang_generate`` span naming ``rid`` from ``start``: closed at ``end``, or
    never closed."""
    records = [rec("span_start", "sglang_generate", start, sid, parent,
                   attrs={"sglang_request_id": rid})]
    if end is not None:
        records.append(rec("span_end", "sglang_generate", end, sid))
    return records


def _joined(frames: TraceFrames, requests: dict[str, tuple[float, float]]) -> TraceFrames:
    engine = Engine()
    for rid, (start, end) in requests.items():
        engine.request(rid, T0 + start, T0 + end, slices=plain_slices(T0 + start, T0 + end))
    return join_engine(frames, engine.table())


def _beside_a_closed_one() -> TraceFrames:
    """The reviewer's case: a closed generation 0-10 s and one still open drawn to 4 s
    (its row's last timestamp), each with a request 1-9 s."""
    frames = frames_of(sample(*_generation("r1", 0.0, end=10.0), index=0),
                       sample(*_generation("r2", 0.0), rec("event", "tick", 4.0), index=1))
    return _joined(frames, {"r1": (1.0, 9.0), "r2": (1.0, 9.0)})


def _cut_by_its_next_turn() -> TraceFrames:
    """One sample: an open generation drawn to 5 s, where the next turn's (closed, 5-14 s,
    its sibling under the sample's 0-20 s span) starts; the first turn's request runs on
    to 9 s, beside the second's."""
    frames = frames_of(sample(rec("span_start", "turns", 0.0, "t"),
                              *_generation("r1", 0.0, sid="g1", parent="t"),
                              *_generation("r2", 5.0, end=14.0, sid="g2", parent="t"),
                              rec("span_end", "turns", 20.0, "t"), index=0))
    return _joined(frames, {"r1": (1.0, 9.0), "r2": (5.5, 12.0)})


def _request_before_its_span() -> TraceFrames:
    """An open generation from 3 s, drawn to 4 s, whose request the join places from
    1.5 s: both sides clip it at the span's start, neither at its drawn end. (A request
    lands before its span only when its host's bounds disagree: here a closed span 0-5 s
    whose request ran 1-9 s, cut short on the client's side, and the skew is the median
    of the two requests' lower bounds, 0.5 s.)"""
    frames = frames_of(sample(*_generation("r1", 0.0, end=5.0), index=0),
                       sample(*_generation("r2", 3.0), rec("event", "tick", 4.0), index=1))
    joined = _joined(frames, {"r1": (1.0, 9.0), "r2": (1.0, 9.0)})
    assert not joined.engine_skew["consistent"].iloc[0]
    assert joined.engine_skew["skew"].iloc[0] == pytest.approx(0.5)
    return joined


CASES = {"beside a closed span": _beside_a_closed_one,
         "cut by its next turn": _cut_by_its_next_turn,
         "request before its span": _request_before_its_span}


@pytest.mark.parametrize("make", CASES.values(), ids=CASES.keys())
def test_the_band_of_an_open_span_is_engine_breakdown(make) -> None:
    joined = make()
    core = joined.span_core
    generations = core[(core["name"] == "sglang_generate").to_numpy()]
    assert (generations["state"] == "open").any()
    engine = core[(core["origin"] == "engine").to_numpy()]
    open_rows = generations[(generations["state"] == "open").to_numpy()]
    # some engine time lies past an open span's drawn end: the case is the one it names
    assert any((engine["sample_row"] == row).any()
               and engine.loc[(engine["sample_row"] == row).to_numpy(), "end"].max() > drawn
               for row, drawn in zip(open_rows["sample_row"], open_rows["display_end"],
                                     strict=True))
    python = engine_breakdown(joined)[PHASE_COLUMNS].reset_index(drop=True)
    band = band_seconds(joined)
    assert band.shape == python.shape
    assert (band - python).abs().to_numpy().max() < TOLERANCE, f"band\n{band}\nPython\n{python}"
    assert python["decode_s"].gt(0).all()


def test_an_open_spans_band_is_its_requests_whole_time() -> None:
    """The reviewer's case in figures: both samples' requests run 1-9 s in their host's
    clock; neither span clips them, so each sample counts all of it."""
    joined = _beside_a_closed_one()
    band = band_seconds(joined)
    expected = {"queue_s": 1.6, "prefill_s": 0.8, "decode_s": 5.6}
    for column, seconds in expected.items():
        assert band[column].tolist() == pytest.approx([seconds, seconds], abs=TOLERANCE)
