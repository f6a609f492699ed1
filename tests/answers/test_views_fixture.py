"""The widget's critical path and flame table give Python's answers.

``js/test/fixtures/critical_flame.json`` holds payloads of hand-built traces
with what :func:`analysis.critical_path` and :func:`analysis.flame` say about
them; ``js/test/critical.test.js`` and ``flame.test.js`` run the widget's
``critical.js`` and ``flame.js`` on the same payloads. The default payload leaves the real
``sglang_pd_*`` spans out (their ``[P]``/``[D]`` virtual spans draw them, the
phases' segment spans travel as the virtual spans' PD segments), so the expected
answers name the virtual span (and the segment) where Python names the real one.
Regenerate after a deliberate change with
``PYTHONPATH=. python tests/answers/test_views_fixture.py``.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slime_trace_widget import TraceTimeline, analysis
from slime_trace_widget.frames import TraceFrames
from slime_trace_widget.tables.pd_lanes import LANE_SUFFIX, PD_PREFIX, PHASE_SPANS
from slime_trace_widget.view.payload import encode
from tests.answers.test_critical_and_flame import _agent
from tests.frames.test_frames import frames_of, rec, sample

ROOT = Path(__file__).parents[2]
FIXTURE = ROOT / "js" / "test" / "fixtures" / "critical_flame.json"


def _retry_and_open(index: int) -> dict:
    """A failed attempt, its retry left open (drawn to the row's end at 6), and a
    tool call concurrent with the retry that ends earlier (never critical)."""
    return sample(
        rec("span_start", "generate", 0, "a"),
        rec("span_end", "generate", 2, "a", attrs={"error_type": "Timeout"}),
        rec("span_start", "generate", 2, "b", attempt=1),
        rec("span_start", "tool", 2.5, "t", "b", attempt=1),
        rec("span_end", "tool", 3, "t", attempt=1),
        rec("span_start", "tool", 3, "u", "b", attempt=1),
        rec("span_end", "tool", 5, "u", attempt=1),
        rec("span_start", "log", 1, "l"),
        rec("span_end", "log", 5.5, "l"),
        rec("event", "tick", 6, attempt=1),
        index=index)


def _attribute_pd(index: int) -> dict:
    """Attribute-form PD: the generation's end attributes lay [P] 0-1 and [D] 1-3
    under it; then a reward 3-4."""
    return sample(
        rec("span_start", "rollout", 0, "r"),
        rec("span_start", "generate", 0, "g", "r"),
        rec("span_end", "generate", 3, "g", attrs={"pd_prefill_forward_duration": 1.0,
                                                   "pd_decode_forward_duration": 2.0}),
        rec("span_start", "reward", 3, "w", "r"),
        rec("span_end", "reward", 4, "w"),
        rec("span_end", "rollout", 4, "r"),
        index=index)


def _child_pd_with_segments(index: int) -> dict:
    """Child-form PD whose phases have segment children (sent only when the
    caller's span filter selects the real spans)."""
    return sample(
        rec("span_start", "generate", 0, "g"),
        rec("span_start", "sglang_pd_prefill", 0, "p", "g"),
        rec("span_start", "sglang_pd_prefill_forward", 0.2, "pf", "p"),
        rec("span_end", "sglang_pd_prefill_forward", 0.8, "pf"),
        rec("span_end", "sglang_pd_prefill", 1, "p"),
        rec("span_start", "sglang_pd_decode", 1, "d", "g"),
        rec("span_end", "sglang_pd_decode", 4, "d"),
        rec("span_end", "generate", 4, "g"),
        index=index)


def _segments_everywhere(index: int) -> dict:
    """Child-form PD whose both phases have segments: a gap between the prefill
    segments (the phase's own time), a decode segment ending with its phase; then
    a tool after the generation (named ``chat``: its frames must not merge
    with the attribute form's ``generate [D]`` in the payload's names)."""
    return sample(
        rec("span_start", "rollout", 0, "r"),
        rec("span_start", "chat", 0, "g", "r"),
        rec("span_start", "sglang_pd_prefill", 0, "p", "g"),
        rec("span_start", "sglang_pd_prefill_bootstrap", 0, "pb", "p"),
        rec("span_end", "sglang_pd_prefill_bootstrap", 0.25, "pb"),
        rec("span_start", "sglang_pd_prefill_forward", 0.5, "pf", "p"),
        rec("span_end", "sglang_pd_prefill_forward", 1, "pf"),
        rec("span_end", "sglang_pd_prefill", 1, "p"),
        rec("span_start", "sglang_pd_decode", 1, "d", "g"),
        rec("span_start", "sglang_pd_decode_transfer", 1, "dt", "d"),
        rec("span_end", "sglang_pd_decode_transfer", 1.5, "dt"),
        rec("span_start", "sglang_pd_decode_forward", 1.5, "df", "d"),
        rec("span_end", "sglang_pd_decode_forward", 3.5, "df"),
        rec("span_end", "sglang_pd_decode", 3.5, "d"),
        rec("span_end", "chat", 3.5, "g"),
        rec("span_start", "tool", 3.5, "t", "r"),
        rec("span_end", "tool", 5, "t"),
        rec("span_end", "rollout", 5, "r"),
        index=index)


def _outliving_children(index: int) -> dict:
    """Children that outlive their parents: a reward 3-9 started from a generation
    0-4 (itself under a rollout 0-5), after a tool 1-2 under it; a log 4-4.5 in the
    rollout after the generation, never on the path. Then a span 10-20 whose child
    10-12 has a child 11-18 that outlives it, followed by a last step 18-20."""
    return sample(
        rec("span_start", "rollout", 0, "r"),
        rec("span_start", "generate", 0, "g", "r"),
        rec("span_start", "tool", 1, "t", "g"),
        rec("span_end", "tool", 2, "t"),
        rec("span_start", "reward", 3, "w", "g"),
        rec("span_end", "generate", 4, "g"),
        rec("span_start", "log", 4, "l", "r"),
        rec("span_end", "log", 4.5, "l"),
        rec("span_end", "rollout", 5, "r"),
        rec("span_end", "reward", 9, "w"),
        rec("span_start", "agent", 10, "a"),
        rec("span_start", "turn", 10, "b", "a"),
        rec("span_start", "judge", 11, "c", "b"),
        rec("span_end", "turn", 12, "b"),
        rec("span_end", "judge", 18, "c"),
        rec("span_start", "tool", 18, "d", "a"),
        rec("span_end", "tool", 20, "d"),
        rec("span_end", "agent", 20, "a"),
        index=index)


def _children_after_their_parents(index: int) -> dict:
    """Children that start after their parents ended: a generation 0-10 whose
    reward 12-20 follows a top-level tool 10-12 (the tool is on the path between
    them); then a rollout 20-40 whose turn 20-25 has a judge 30-40 (the rollout's
    own time holds 25-30)."""
    return sample(
        rec("span_start", "generate", 0, "g"),
        rec("span_end", "generate", 10, "g"),
        rec("span_start", "tool", 10, "t"),
        rec("span_end", "tool", 12, "t"),
        rec("span_start", "reward", 12, "w", "g"),
        rec("span_end", "reward", 20, "w"),
        rec("span_start", "rollout", 20, "r"),
        rec("span_start", "turn", 20, "u", "r"),
        rec("span_end", "turn", 25, "u"),
        rec("span_start", "judge", 30, "j", "u"),
        rec("span_end", "judge", 40, "j"),
        rec("span_end", "rollout", 40, "r"),
        index=index)


def _passed_over_children(index: int) -> dict:
    """Spans still running when a later one had the path: a top-level tool 0-3.7
    under a reward 1.6-6.5 (the sample's node has no time of its own), then a parent
    7-10 whose child 9-13 runs past it up to a later child 12-15."""
    return sample(
        rec("span_start", "tool", 0, "t"),
        rec("span_start", "reward", 1.6, "w"),
        rec("span_end", "tool", 3.7, "t"),
        rec("span_end", "reward", 6.5, "w"),
        rec("span_start", "parent", 7, "p"),
        rec("span_start", "mid", 9, "m", "p"),
        rec("span_end", "parent", 10, "p"),
        rec("span_start", "late", 12, "l", "p"),
        rec("span_end", "mid", 13, "m"),
        rec("span_end", "late", 15, "l"),
        index=index)


def _payload_name_paths(path: str) -> str:
    """A flame path as the default payload spells it: a real PD phase span is
    its virtual span, named ``"<generation name> [P]"`` / ``[D]``, and a real
    span under it is the virtual span's segment, named without the
    ``sglang_pd_`` prefix."""
    parts = path.split(";")
    for k, part in enumerate(parts):
        if k > 1 and parts[k - 1] in PHASE_SPANS:
            parts[k] = part.removeprefix(PD_PREFIX)
    for k, part in enumerate(parts):
        if part in PHASE_SPANS and k > 0:
            parts[k] = parts[k - 1] + LANE_SUFFIX[PHASE_SPANS[part]]
    return ";".join(parts)


def _flame_rows(table: Any, rename: bool) -> list[dict[str, Any]]:
    rows = [{"path": _payload_name_paths(row.path) if rename else row.path,
             "count": int(row.count), "total": float(row.total), "self": float(row.self),
             "p50": float(row.p50), "p95": float(row.p95)}
            for row in table.itertuples()]
    assert len({row["path"] for row in rows}) == len(rows), "two Python paths spelled alike"
    return rows


def _case(name: str, frames: TraceFrames, all_spans: bool,
          window: tuple[float, float]) -> dict[str, Any]:
    """One payload and Python's answers, spans named by payload index (and a
    segment span by its virtual span's index and its payload segment index; -1
    for a span)."""
    view = encode(frames, spans=frames.span_core if all_spans else None)
    core = frames.span_core
    position = {int(label): k for k, label in enumerate(view.span_index)}
    # Payload segment order (payload._segment_columns): by owner position, then start.
    segments = frames.segments[frames.segments["span_index"].isin(position)]
    owners = segments["span_index"].map(position).to_numpy()
    segments = segments.iloc[np.lexsort((segments["start"].to_numpy(), owners))]
    seg_position = {(int(owner), str(name), float(start)): k for k, (owner, name, start)
                    in enumerate(segments[["span_index", "name", "start"]].itertuples(
                        index=False))}

    def twin_of(label: int) -> int:
        span = core.loc[label]
        twin = core[core["virtual"] & (core["parent_index"] == span["parent_index"])
                    & (core["start"] == span["start"])
                    & (core["display_end"] == span["display_end"])]
        return int(twin.index[0])

    def payload_step(label: int) -> list[int]:
        if label in position:
            return [position[label], -1]
        span = core.loc[label]
        if str(span["name"]) in PHASE_SPANS:
            # A real PD phase span left out of the payload: its virtual twin stands for it.
            return [position[twin_of(label)], -1]
        # A real segment span left out: its virtual phase's segment stands for it.
        owner = twin_of(int(span["parent_index"]))
        name = str(span["name"]).removeprefix(PD_PREFIX)
        return [position[owner], seg_position[(owner, name, float(span["start"]))]]

    critical = []
    for k, row in enumerate(view.sample_rows):
        path = analysis.critical_path(frames, int(row))
        critical.append({"sample": k, "path": [[*payload_step(int(label)), float(seconds)]
                                               for label, seconds in path["critical"].items()]})
    t0 = frames.t0
    wire = {**view.payload, "buffers": {key: base64.b64encode(raw).decode()
                                        for key, raw in view.payload["buffers"].items()}}
    return {
        "name": name,
        "payload": wire,
        "critical": critical,
        "flame": _flame_rows(analysis.flame(frames), not all_spans),
        "window": list(window),
        "flame_window": _flame_rows(analysis.flame(frames, window=(t0 + window[0],
                                                                    t0 + window[1])),
                                    not all_spans),
    }


def fixture() -> dict[str, Any]:
    child = frames_of(_agent(0), _agent(1), _retry_and_open(2))
    attrs = frames_of(_attribute_pd(0), _retry_and_open(1))
    segments = frames_of(_child_pd_with_segments(0), _attribute_pd(1))
    mixed = frames_of(_agent(0), _attribute_pd(1))
    segment_children = frames_of(_segments_everywhere(0), _child_pd_with_segments(1),
                                 _attribute_pd(2))
    outliving = frames_of(_outliving_children(0), _agent(1),
                          _children_after_their_parents(2), _passed_over_children(3))
    return {"cases": [
        _case("default payload: child-form PD with segment children, and the attribute form",
              segment_children, False, (0.4, 3.0)),
        _case("default payload: child-form PD, retry, open span", child, False, (0.5, 5.0)),
        _case("default payload: attribute-form PD, retry, open span", attrs, False, (0.5, 3.5)),
        _case("every span sent: real PD spans and their segments beside the virtual ones",
              segments, True, (0.5, 3.5)),
        _case("every span sent: child-form and attribute-form PD", mixed, True, (2.0, 9.5)),
        _case("default payload: children outliving their parents", outliving, False,
              (3.5, 11.5)),
    ]}


def fixture_text() -> str:
    return json.dumps(fixture(), indent=1, sort_keys=True, allow_nan=False) + "\n"


def test_views_fixture_is_current() -> None:
    assert FIXTURE.exists(), f"missing {FIXTURE}: run python {Path(__file__).relative_to(ROOT)}"
    assert FIXTURE.read_text(encoding="utf-8") == fixture_text(), (
        f"{FIXTURE.relative_to(ROOT)} is stale (analysis, the encoder or the traces changed): "
        f"regenerate with PYTHONPATH=. python {Path(__file__).relative_to(ROOT)}")


def test_fixture_cases_hold_what_they_claim() -> None:
    """Each case exercises what it is for: PD of both forms, an open span, a retry."""
    cases = {case["name"]: case for case in fixture()["cases"]}
    child = cases["default payload: child-form PD, retry, open span"]
    names = child["payload"]["meta"]["names"]
    assert "generate [P]" in names and not any(n.startswith("sglang_pd_") for n in names)
    assert {row["path"] for row in child["flame"]} >= {"rollout;generate;generate [D]",
                                                        "generate", "generate;tool"}
    assert [seconds for _, _, seconds in child["critical"][2]["path"]] == [2, 1.5, 0.5, 2]
    segs = cases["default payload: child-form PD with segment children, and the attribute form"]
    assert {"rollout;chat;chat [P];prefill_forward",
            "rollout;chat;chat [D];decode_forward",
            "generate;generate [P];prefill_forward",
            "rollout;generate;generate [D]"} <= {row["path"] for row in segs["flame"]}
    # The prefill's segments and its gap, the decode's segments: steps on segments.
    assert [(seg >= 0, seconds) for _, seg, seconds in segs["critical"][0]["path"]] == [
        (False, 0), (False, 0), (False, 0.25), (True, 0.25), (True, 0.5), (False, 0),
        (True, 0.5), (True, 2), (False, 1.5)]
    attrs = cases["default payload: attribute-form PD, retry, open span"]
    assert "rollout;generate;generate [P]" in {row["path"] for row in attrs["flame"]}
    outliving = cases["default payload: children outliving their parents"]
    # The reward and the judge hold the time past their parents' ends; 1 s idle at 9-10.
    assert [seconds for _, _, seconds in outliving["critical"][0]["path"]] == [
        0, 2, 1, 6, 0, 1, 7, 2]
    # generate 0-10, tool 10-12, reward 12-20, rollout 25-30, turn 20-25, judge 30-40:
    # every instant of the 40 s once.
    assert [seconds for _, _, seconds in outliving["critical"][2]["path"]] == [
        10, 2, 8, 5, 5, 10]
    # tool 0-1.6, reward 1.6-6.5, parent 7-9, mid 9-12, late 12-15 (idle at 6.5-7).
    assert [seconds for _, _, seconds in outliving["critical"][3]["path"]] == pytest.approx(
        [1.6, 4.9, 2, 3, 3])
    segments = cases["every span sent: real PD spans and their segments beside the virtual ones"]
    assert "sglang_pd_prefill_forward" in segments["payload"]["meta"]["names"]
    assert "generate;sglang_pd_prefill;sglang_pd_prefill_forward" in {
        row["path"] for row in segments["flame"]}


def test_a_flame_frame_selection_reaches_python() -> None:
    """The flame view's ``selected`` has no payload index: the kernel keeps it as sent,
    and it names no span or event."""
    tl = TraceTimeline.from_frames(frames_of(_agent(0), _agent(1)))
    chosen = {"kind": "flame", "path": "rollout;tool", "count": 4, "total": 16.0, "self": 16.0}
    tl.selected = dict(chosen)
    assert tl.selected == chosen
    assert tl.selected_span is None and tl.selected_event is None
    row = analysis.flame(tl.frames).set_index("path").loc[chosen["path"]]
    assert (row["count"], row["total"], row["self"]) == (4, 16.0, 16.0)


if __name__ == "__main__":
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(fixture_text(), encoding="utf-8")
    print(f"wrote {FIXTURE.relative_to(ROOT)}", file=sys.stderr)
