"""One payload contract: the encoder, the decoder and the docs read the same table.

``js/test/fixtures/golden_payload.json`` is a payload written by this encoder
(buffers in base64) with the values it must decode to, taken from the frames;
``js/test/data/decode.test.js`` decodes it. The engines' load is a small scrape table
attached to the frames (two engines, a scrape before the frames' time that still holds at
their start, one after it that is left out). Regenerate it after a deliberate change
with ``PYTHONPATH=. python tests/view/test_payload_contract.py``.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from slime_trace_widget.answers.ledger import FATES, sample_fates, signal_ledger
from slime_trace_widget.answers.links import group_members, links
from slime_trace_widget.answers.tail import tail_price
from slime_trace_widget.frames.engine_load import engine_load_frame, load_tracks
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.contract import CONTRACT
from slime_trace_widget.view.payload import encode
from slime_trace_widget.vocabularies import CLIP_REASONS, EVENT_KINDS, LOAD_TRACKS
from tests.support.written_out import source_files, written_out

ROOT = Path(__file__).parents[2]
FIXTURES = Path(__file__).parents[1] / "fixtures"
GOLDEN = ROOT / "js" / "test" / "fixtures" / "golden_payload.json"
#: Three dumps combined, seven samples picked to hold PD segments, a retry, an
#: error, unmatched ends and spans left open for each clip reason seen.
DUMPS = ("small.pt", "edge_orphan_end.pt", "edge_open_span.pt")
ROWS = [1, 6, 7, 8, 16, 17, 19]


def _times(values: Any, t0: float) -> list[float | None]:
    return [None if v != v else round(float(v) - t0, 6) for v in values]


def with_load(frames: Any) -> Any:
    """The frames with two engines' scrapes: running requests and KV token usage."""
    t0, t1 = frames.t0, frames.t1
    times = [t0 - 5.0, t0 + 1.0, t0 + 2.5, t1 - 1.0, t1 + 5.0]
    rows = [(engine, metric, ts, value)
            for engine, scale in (("engine-b", 2.0), ("engine-a", 1.0))
            for metric, base in (("sglang:num_running_reqs", 3.0), ("sglang:token_usage", 0.25))
            for k, ts in enumerate(times)
            for value in [base * scale + k]]
    engine, metric, ts, value = zip(*rows, strict=True)
    return replace(frames, engine_load=engine_load_frame(engine, metric, [""] * len(rows), ts,
                                                         value))


def _expected_load(frames: Any, t0: float) -> dict[str, Any]:
    """The series the payload must carry: each (engine, track)'s scrapes within the
    frames' time and the last one before it."""
    tracks = load_tracks(frames.engine_load)
    engines = sorted(tracks["engine"].astype(str).unique())
    series = []
    for engine in engines:
        for track in LOAD_TRACKS:
            rows = tracks[(tracks["engine"].astype(str) == engine)
                          & (tracks["track"].astype(str) == track)]
            if not len(rows):
                continue
            ts, value = rows["ts"].to_numpy(), rows["value"].to_numpy()
            before = np.flatnonzero(ts < t0)[-1:]
            keep = np.concatenate([before, np.flatnonzero((ts >= t0) & (ts <= frames.t1))])
            series.append({"engine": engine, "track": track,
                           "ts": [round(float(ts[k]) - t0, 6) for k in keep],
                           "value": [float(value[k]) for k in keep]})
    return {"engines": engines, "series": series}


def golden() -> dict[str, Any]:
    """The golden payload and, from the frames, what each payload item must say."""
    frames = with_load(load_frames([FIXTURES / name for name in DUMPS]))
    view = encode(frames, samples=frames.samples.index[ROWS])
    payload = view.payload
    t0 = payload["meta"]["t0"]
    spans = frames.span_core.loc[view.span_index]
    span_pos = {int(index): k for k, index in enumerate(view.span_index)}
    events = frames.event_core.loc[view.event_index]
    samples = frames.samples.iloc[view.sample_rows]
    segments = frames.segments[frames.segments["span_index"].isin(view.span_index)]
    sample_pos = {int(row): k for k, row in enumerate(view.sample_rows)}
    expected = {
        "samples": {
            "row": [int(r) for r in view.sample_rows],
            "status": [str(v) for v in samples["status"]],
            "source": [str(v) for v in samples["source"]],
            "start": _times(samples["start"], t0),
            "end": _times(samples["end"], t0),
            "attempts": [int(v) for v in samples["attempts"]],
            "fate": [str(v) for v in sample_fates(frames).loc[samples.index]],
        },
        "spans": {
            "sample": [sample_pos[int(r)] for r in spans["sample_row"]],
            "name": [str(v) for v in spans["name"]],
            "start": _times(spans["start"], t0),
            "end": _times(spans["display_end"], t0),
            "duration": [None if v != v else round(float(v), 9)
                         for v in spans["display_end"] - spans["start"]],
            "lane": [int(v) for v in spans["lane"]],
            "depth": [int(v) for v in spans["depth"]],
            "open": [bool(v) for v in spans["state"] == "open"],
            "virtual": [bool(v) for v in spans["virtual"]],
            "pd_segment_spans": [bool(v) for v in spans["pd_form"] == "children"],
            "error": [bool(v) for v in spans["error"]],
            "clip_reason": [None if v != v else str(v) for v in spans["clip_reason"]],
            "attempt": [int(v) for v in spans["attempt"]],
            "parent": [span_pos.get(int(p), -1) for p in spans["parent_index"]],
        },
        "segments": sorted(
            ([span_pos[int(s)], str(n), round(float(a) - t0, 6), round(float(b) - t0, 6)]
             for s, n, a, b in zip(segments["span_index"], segments["name"],
                                   segments["start"], segments["end"], strict=True)),
            key=lambda seg: (seg[0], seg[2])),
        "events": {
            "sample": [sample_pos[int(r)] for r in events["sample_row"]],
            "name": [str(v) for v in events["name"]],
            "ts": _times(events["ts"], t0),
            "kind": [str(v) for v in events["kind"]],
            "lane": [int(v) for v in events["lane"]],
            "parent": [span_pos.get(int(p), -1) for p in events["parent_index"]],
        },
    }
    expected["links"] = _expected_links(frames, span_pos, {
        int(index): k for k, index in enumerate(view.event_index)})
    expected["load"] = _expected_load(frames, t0)
    expected["ledger"] = _expected_ledger(frames, view.sample_rows, t0)
    expected["warnings"] = dict(frames.warnings)
    wire = {**payload, "buffers": {name: base64.b64encode(raw).decode()
                                   for name, raw in payload["buffers"].items()}}
    return {"payload": wire, "expected": expected}


def _expected_ledger(frames: Any, rows: Any, t0: float) -> list[dict[str, Any]]:
    """Per dump shown (each the only dump of its rollout id): its row of
    ``signal_ledger`` and ``tail_price``, and where the 90%-finished instant is drawn
    (seconds after ``t0``: the dump's first start plus ``finished_90``)."""
    ledger, tail = signal_ledger(frames), tail_price(frames)
    samples = frames.samples
    out = []
    for dump in sorted({int(d) for d in samples["dump"].iloc[rows]}):
        rollout_id = frames.rollout_ids[dump]
        assert list(frames.rollout_ids).count(rollout_id) == 1
        row, price = ledger.loc[rollout_id], tail.loc[rollout_id]
        start = float(samples.loc[samples["dump"] == dump, "start"].min())
        out.append({
            "rollout": dump,
            "samples": [int(row[f"samples_{fate}"]) for fate in FATES],
            "seconds": [round(float(row[f"seconds_{fate}"]), 6) for fate in FATES],
            "finished_90": round(float(price["finished_90"]), 6),
            "marker_time": round(start + float(price["finished_90"]) - t0, 6),
        })
    return out


def _expected_links(frames: Any, span_pos: dict[int, int],
                    event_pos: dict[int, int]) -> dict[str, list]:
    """The links with both ends in the payload: attempt/remote pairs as
    ``[kind, "span:i"|"event:j", ...]`` and each group as its sorted members."""
    table = links(frames)
    where = {"span": span_pos, "event": event_pos}
    pairs = sorted(
        [kind, f"{fk}:{where[fk][f]}", f"{tk}:{where[tk][t]}"]
        for kind, fk, f, tk, t in table[table["kind"] != "group"][
            ["kind", "from_kind", "from_index", "to_kind", "to_index"]].itertuples(index=False)
        if f in where[fk] and t in where[tk])
    groups: dict[int, list[int]] = {}
    for span, hub in group_members(table).itertuples(index=False):
        if span in span_pos:
            groups.setdefault(int(hub), []).append(span_pos[span])
    return {"pairs": pairs, "groups": sorted(sorted(g) for g in groups.values() if len(g) > 1)}


def golden_text() -> str:
    return json.dumps(golden(), indent=1, sort_keys=True, allow_nan=False) + "\n"


def test_golden_payload_is_current() -> None:
    assert GOLDEN.exists(), f"missing {GOLDEN}: run python {Path(__file__).relative_to(ROOT)}"
    assert GOLDEN.read_text(encoding="utf-8") == golden_text(), (
        f"{GOLDEN.relative_to(ROOT)} is stale (the encoder or the fixtures changed): "
        f"regenerate with PYTHONPATH=. python {Path(__file__).relative_to(ROOT)}")


def test_golden_payload_covers_the_flags() -> None:
    spans = golden()["expected"]["spans"]
    events = golden()["expected"]["events"]
    for flag in ("open", "virtual", "error", "pd_segment_spans"):
        assert any(spans[flag]), flag
    assert max(spans["attempt"]) > 0
    assert set(events["kind"]) == set(EVENT_KINDS)
    assert len({s for s in spans["clip_reason"] if s}) >= 2
    found = golden()["expected"]["links"]
    assert found["groups"] and {kind for kind, _, _ in found["pairs"]} == {"attempt"}
    load = golden()["expected"]["load"]
    assert load["engines"] == ["engine-a", "engine-b"]
    assert {s["track"] for s in load["series"]} == {"running", "token_usage"}
    assert all(s["ts"][0] < 0 < s["ts"][1] and len(s["ts"]) == 4 for s in load["series"])
    expected = golden()["expected"]
    assert {"signal", "truncated"} <= set(expected["samples"]["fate"])
    assert len(expected["ledger"]) == 3
    assert sum(entry["samples"][FATES.index("no_signal")] for entry in expected["ledger"]) > 0


def test_golden_payload_sorted_as_the_contract_says() -> None:
    payload = json.loads(GOLDEN.read_text(encoding="utf-8"))["payload"]
    for keys in CONTRACT["sort_keys"].values():
        cols = [np.frombuffer(base64.b64decode(payload["buffers"][k]),
                              dtype="<" + payload["meta"]["columns"][k]) for k in keys]
        order = np.lexsort(cols[::-1])
        assert (order == np.arange(len(order))).all(), keys


def test_docs_name_every_column_and_point_to_the_contract() -> None:
    docs = (ROOT / "docs" / "payload.md").read_text(encoding="utf-8")
    assert "payload_contract.json" in docs
    for name in CONTRACT["columns"]:
        assert re.search(rf"`{name}`", docs), name


def test_the_codes_index_the_frames_categories() -> None:
    frames = load_frames(FIXTURES / "edge_open_span.pt")
    assert list(frames.span_core["clip_reason"].array.categories) == CLIP_REASONS
    assert list(frames.event_core["kind"].array.categories) == EVENT_KINDS
    assert tuple(sample_fates(frames).array.categories) == FATES
    assert CONTRACT["fate_none"] >= len(FATES)


def test_the_meta_holds_the_contract_s_tables_and_sample_strings() -> None:
    payload = golden()["payload"]
    meta = payload["meta"]
    for table, columns in CONTRACT["code_tables"].items():
        assert isinstance(meta[table], list) and meta[table], table
        for column in columns:
            codes = np.frombuffer(base64.b64decode(payload["buffers"][column]),
                                  dtype="<" + meta["columns"][column])
            assert codes.max() < len(meta[table]), f"{column} indexes past {table}"
    assert list(meta["samples"]) == CONTRACT["sample_strings"]


#: The contract's lists the Python and the JS sides both name: read, never written out.
SHARED_LISTS = {"code_tables": list(CONTRACT["code_tables"]),
                "sample_strings": CONTRACT["sample_strings"],
                "sample_text_fields": CONTRACT["sample_text_fields"]}


def test_no_source_writes_a_shared_list_out_again() -> None:
    copies = {str(path.relative_to(ROOT)): found for path in source_files(ROOT)
              if (found := written_out(SHARED_LISTS, path.read_text(encoding="utf-8")))}
    assert not copies, f"these write out lists of payload_contract.json (read it): {copies}"


def test_each_shared_list_written_out_is_found() -> None:
    copies = {"code_tables": 'const TABLES = ["names", "statuses", "sources", "rollouts"];',
              "sample_strings": '_SAMPLE_STRINGS = ("row", "sample_index", "group_index", '
                                '"trace_id", "label")',
              "sample_text_fields": 'FIELDS = ("prompt", "response", "label", "metadata")'}
    assert set(copies) == set(SHARED_LISTS)
    for name, copy in copies.items():
        assert written_out(SHARED_LISTS, copy) == [name], copy


if __name__ == "__main__":
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(golden_text(), encoding="utf-8")
    print(f"wrote {GOLDEN.relative_to(ROOT)}", file=sys.stderr)
