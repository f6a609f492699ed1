"""Rollout diff (``analysis.rollout_diff``) on two hand-built rollouts whose answer is known.

``js/test/fixtures/rollout_diff.json`` holds the payload of these rollouts and the
table ``rollout_diff`` gives; ``js/test/diff.test.js`` checks the widget builds the
same table from the payload. Regenerate it after a deliberate change with
``PYTHONPATH=. python tests/answers/test_rollout_diff.py``.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from slime_trace_widget import analysis
from slime_trace_widget.frames import TraceFrames, combine_frames
from slime_trace_widget.view.payload import encode
from tests.frames.test_frames import frames_of, rec, sample

ROOT = Path(__file__).parents[2]
FIXTURE = ROOT / "js" / "test" / "fixtures" / "rollout_diff.json"
#: Rollout B starts this much later: the payload draws it from its own start.
B_SHIFT = 100.0


def _pd(parent: str, start: float, split: float, end: float, shift: float) -> list[dict]:
    """Child-form PD spans under ``parent``: prefill start-split, decode split-end."""
    p, d = f"{parent}p", f"{parent}d"
    return [rec("span_start", "sglang_pd_prefill", start + shift, p, parent),
            rec("span_end", "sglang_pd_prefill", split + shift, p),
            rec("span_start", "sglang_pd_decode", split + shift, d, parent),
            rec("span_end", "sglang_pd_decode", end + shift, d)]


def _span(name: str, start: float, end: float | None, sid: str, shift: float = 0.0,
          attempt: int = 0, attrs: dict | None = None) -> list[dict]:
    out = [rec("span_start", name, start + shift, sid, attempt=attempt)]
    if end is not None:
        out.append(rec("span_end", name, end + shift, sid, attempt=attempt, attrs=attrs))
    return out


def samples_a() -> list[dict]:
    """tool takes 2 s and 1 s; generate is retried in sample 1; cleanup only here;
    log is left open in sample 1."""
    return [
        sample(*_span("generate", 0, 2, "g0"), *_pd("g0", 0, 0.5, 2, 0),
               *_span("tool", 2, 4, "t0"), *_span("reward", 4, 5, "w0"),
               *_span("cleanup", 5, 5.5, "c0"), index=0),
        sample(*_span("generate", 0, 3, "g1"), *_pd("g1", 0, 1, 3, 0),
               *_span("generate", 3, 4.5, "g2", attempt=1), *_pd("g2", 3, 3.5, 4.5, 0),
               *_span("log", 1, None, "l1", attempt=1),
               *_span("tool", 4.5, 5.5, "t1", attempt=1),
               rec("event", "tick", 6, attempt=1), index=1),
    ]


def samples_b() -> list[dict]:
    """tool got slower (6 s and 7 s); judge is new; sample 1's generate gives its PD
    phases as attributes; log is open in both samples."""
    s = B_SHIFT
    return [
        sample(*_span("generate", 0, 2, "g0", s), *_pd("g0", 0, 0.5, 2, s),
               *_span("tool", 2, 8, "t0", s), *_span("reward", 8, 9, "w0", s),
               *_span("judge", 9, 10, "j0", s), *_span("log", 9, None, "l0", s),
               rec("event", "tick", 10.5 + s), index=0),
        sample(*_span("generate", 0, 2, "g1", s, attrs={"pd_prefill_forward_duration": 0.5,
                                                        "pd_decode_forward_duration": 1.5}),
               *_span("tool", 2, 9, "t1", s), *_span("log", 3, None, "l1", s),
               rec("event", "tick", 9.5 + s), index=1),
    ]


def rollout_a() -> TraceFrames:
    return frames_of(*samples_a())


def rollout_b() -> TraceFrames:
    return frames_of(*samples_b())


def two_rollouts() -> TraceFrames:
    return combine_frames([rollout_a(), rollout_b()])


def test_the_regressed_name_comes_first_with_known_numbers() -> None:
    table = analysis.rollout_diff(two_rollouts())
    assert list(table.columns) == list(analysis.DIFF_COLUMNS)
    assert table.index[0] == "tool"
    tool = table.loc["tool"]
    assert (tool["count_a"], tool["count_b"], tool["count_diff"]) == (2, 2, 0)
    assert tool["p50_a"] == pytest.approx(1.5) and tool["p50_b"] == pytest.approx(6.5)
    assert tool["p95_a"] == pytest.approx(1.95) and tool["p95_b"] == pytest.approx(6.95)
    assert tool["total_a"] == pytest.approx(3) and tool["total_b"] == pytest.approx(13)
    assert tool["total_diff"] == pytest.approx(10)
    assert tool["p50_ratio"] == pytest.approx(6.5 / 1.5)
    diffs = table["total_diff"].to_numpy()
    assert (diffs[:-1] >= diffs[1:]).all()


def test_names_in_one_rollout_have_blanks_on_the_other_side() -> None:
    table = analysis.rollout_diff(two_rollouts())
    judge, cleanup = table.loc["judge"], table.loc["cleanup"]
    assert pd.isna(judge["count_a"]) and pd.isna(judge["p50_a"])
    assert pd.isna(judge["total_a"]) and judge["total_diff"] == pytest.approx(1)
    assert pd.isna(judge["p50_ratio"]) and pd.isna(judge["p50_diff"])
    assert pd.isna(cleanup["count_b"]) and cleanup["total_diff"] == pytest.approx(-0.5)
    assert cleanup["count_diff"] == -1


def test_open_spans_are_counted_apart_and_retries_count_each_attempt() -> None:
    table = analysis.rollout_diff(two_rollouts())
    log = table.loc["log"]
    assert (log["count_a"], log["count_b"], log["open_a"], log["open_b"]) == (0, 0, 1, 2)
    assert pd.isna(log["p50_a"]) and log["total_a"] == 0 and log["total_diff"] == 0
    generate = table.loc["generate"]
    assert generate["count_a"] == 3 and generate["total_a"] == pytest.approx(6.5)
    assert generate["count_b"] == 2 and generate["total_diff"] == pytest.approx(-2.5)
    assert (table["open_a"].sum(), table["open_b"].sum()) == (1, 2)


def test_pd_phases_count_once_in_either_form() -> None:
    table = analysis.rollout_diff(two_rollouts())
    assert not any(name.startswith("sglang_pd_") for name in table.index)
    prefill, decode = table.loc["generate [P]"], table.loc["generate [D]"]
    # A: child form in all three generations; B: child form once, attribute form once
    assert (prefill["count_a"], prefill["count_b"]) == (3, 2)
    assert prefill["total_a"] == pytest.approx(0.5 + 1 + 0.5)
    assert prefill["total_b"] == pytest.approx(0.5 + 0.5)
    assert decode["total_a"] == pytest.approx(1.5 + 2 + 1)
    assert decode["total_b"] == pytest.approx(1.5 + 1.5)


def test_a_span_ending_before_its_start_counts_as_drawn() -> None:
    """A clock stepped back while the second tool ran: its end is 6 s before its start.
    The widget draws it with length 0 (its drawn end is its start) and its diff counts
    it so; the table gives the same numbers, not its negative duration."""
    stepped_back = frames_of(sample(*_span("tool", 0, 4, "t0"), *_span("tool", 10, 4, "t1")))
    spans = stepped_back.span_core
    assert (spans["duration"] < 0).sum() == 1
    assert (spans["display_end"] - spans["start"]).tolist() == pytest.approx([4, 0])
    steady = frames_of(sample(*_span("tool", 0, 4, "t0")))
    tool = analysis.rollout_diff(combine_frames([stepped_back, steady])).loc["tool"]
    assert (tool["count_a"], tool["count_b"], tool["count_diff"]) == (2, 1, -1)
    assert tool["total_a"] == pytest.approx(4) and tool["total_diff"] == pytest.approx(0)
    assert tool["p50_a"] == pytest.approx(2) and tool["p95_a"] == pytest.approx(0.95 * 4)
    assert tool["p50_ratio"] == pytest.approx(4 / 2)


def test_other_pairs_and_the_reverse_order() -> None:
    frames = combine_frames([rollout_a(), rollout_b(), rollout_a()])
    same = analysis.rollout_diff(frames, 0, 2)
    assert (same["total_diff"] == 0).all() and (same["count_diff"] == 0).all()
    back = analysis.rollout_diff(frames, 1, 0)
    assert back.index[-1] == "tool" and back.loc["tool", "total_diff"] == pytest.approx(-10)


@pytest.mark.parametrize("of", ["spans", "ledger"])
@pytest.mark.parametrize("pair", [(0, 9), (5, 1), (-1, 0), (0, True)])
def test_a_position_that_is_no_dump_is_refused(of: str, pair: tuple) -> None:
    """A rollout id passed for a position (9 for the third dump, say) compared a dump
    that is not there: its side all empty, as if every span had gone."""
    frames = combine_frames([rollout_a(), rollout_b(), rollout_a()])
    with pytest.raises(ValueError, match=r"is not a dump position of these frames.*3 dump"):
        analysis.rollout_diff(frames, *pair, of=of)


def test_the_default_pair_needs_two_dumps() -> None:
    with pytest.raises(ValueError, match=r"1 is not a dump position.*1 dump"):
        analysis.rollout_diff(rollout_a())


# --------------------------------------------------------------------------- JS fixture


def _plain(value: Any) -> Any:
    return None if pd.isna(value) else float(value)


def fixture() -> dict[str, Any]:
    """The payload the widget gets for the two rollouts, and the table it must build."""
    frames = two_rollouts()
    payload = encode(frames, align="rollout").payload
    wire = {**payload, "buffers": {name: base64.b64encode(raw).decode()
                                   for name, raw in payload["buffers"].items()}}
    table = analysis.rollout_diff(frames)
    rows = [{"name": str(name), **{c: _plain(row[c]) for c in analysis.DIFF_COLUMNS}}
            for name, row in table.iterrows()]
    return {"payload": wire, "pair": [0, 1], "expected": rows}


def fixture_text() -> str:
    return json.dumps(fixture(), indent=1, sort_keys=True, allow_nan=False) + "\n"


def test_js_fixture_is_current() -> None:
    assert FIXTURE.exists(), f"missing {FIXTURE}: run python {Path(__file__).relative_to(ROOT)}"
    assert FIXTURE.read_text(encoding="utf-8") == fixture_text(), (
        f"{FIXTURE.relative_to(ROOT)} is stale: regenerate with "
        f"PYTHONPATH=. python {Path(__file__).relative_to(ROOT)}")


if __name__ == "__main__":
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(fixture_text(), encoding="utf-8")
    print(f"wrote {FIXTURE.relative_to(ROOT)}", file=sys.stderr)
