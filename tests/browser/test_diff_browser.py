"""The rollout diff in JupyterLab and in a to_html snapshot from file://, on the two
hand-built rollouts of tests/answers/test_rollout_diff.py (tool got 5 s slower per call)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slime_trace_widget import TraceTimeline
from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.payload import encode
from tests.answers.test_rollout_diff import samples_a, samples_b
from tests.browser.notebooks import FIRST_WIDGET, run_first_widget
from tests.browser.test_snapshot_browser import _debug, opened
from tests.support.browser import VIEWPORT, JupyterLab

pytestmark = pytest.mark.browser

FIRST = FIRST_WIDGET
#: How many times the test reruns a cell waiting for the debounced view_state to arrive.
STATE_TRIES = 40


def _slowest_tools(paths: list[Path]) -> tuple[int, int]:
    """Payload indices of the longest tool span in rollout A (2 s) and in B (7 s)."""
    frames = load_frames(paths)
    view = encode(frames, align="rollout")
    spans = frames.span_core.loc[view.span_index]
    dump = frames.samples["dump"].to_numpy()[spans["sample_row"].to_numpy()]
    tool = (spans["name"] == "tool").to_numpy()
    durations = spans["duration"].to_numpy()
    picks = []
    for side in (0, 1):
        mine = np.flatnonzero(tool & (dump == side))
        picks.append(int(mine[np.argmax(durations[mine])]))
    assert durations[picks] == pytest.approx([2, 7])
    return picks[0], picks[1]


def _pick_and_check(page: Any, scope: str, name: str, side: str, span: int) -> None:
    """Click ``name`` in the diff table; that span is selected, on screen, highlighted."""
    page.locator(f'{scope} .stw-diffpanel tr[data-name="{name}"] .stw-name-cell').click()
    page.wait_for_function(
        "([sel, span]) => document.querySelector(sel).stwDebug.state().selected?.index === span",
        arg=[f"{scope}", span], timeout=30_000)
    root = page.locator(scope)
    state = root.evaluate("el => el.stwDebug.state()")
    assert state["highlight"] == name
    focus = root.evaluate("el => el.stwDebug.diff().focus")
    assert focus == {"name": name, "side": side, "span": span}
    page.wait_for_function("sel => !!document.querySelector(sel).stwDebug.selectionRect()",
                           arg=scope, timeout=30_000)
    assert root.evaluate("(el, i) => el.stwDebug.spanRect(i)", span), "selected span drawn"
    badge = page.locator(f'{scope} .stw-diffpanel tr.stw-row-current .stw-badge')
    assert badge.inner_text() == side.upper()


def _check_table(page: Any, scope: str) -> None:
    rows = page.locator(f"{scope} .stw-diffpanel tr.stw-diff-row")
    rows.first.wait_for(timeout=30_000)
    names = [rows.nth(i).get_attribute("data-name") for i in range(rows.count())]
    assert names[0] == "tool", names
    assert {"judge", "cleanup", "generate [P]", "generate [D]"} <= set(names)
    assert not any(n.startswith("sglang_pd_") for n in names)
    first = rows.first.locator("td")
    cells = [first.nth(i).inner_text() for i in range(first.count())]
    assert cells[1:4] == ["2", "2", "0"]  # count A, B, delta
    assert cells[10:13] == ["3.00 s", "13.0 s", "+10.0 s"]  # total A, B, delta
    judge = page.locator(f'{scope} .stw-diffpanel tr[data-name="judge"] td')
    assert judge.nth(1).inner_text() == "" and judge.nth(2).inner_text() == "1"
    header = page.locator(f"{scope} .stw-diffpanel").inner_text()
    assert "largest increase of total first" in header
    assert "A: rollout 1 · B: rollout 2" in header


def test_diff_in_jupyterlab_and_in_its_snapshot(lab: JupyterLab, chromium: Any) -> None:
    paths = [lab.notebooks / "rollout_1.pt", lab.notebooks / "rollout_2.pt"]
    save_dump(paths[0], samples_a(), rollout_id=1)
    save_dump(paths[1], samples_b(), rollout_id=2)
    slow_a, slow_b = _slowest_tools(paths)
    snapshot = lab.notebooks / "diff.html"
    url = lab.write_notebook("diff.ipynb", [
        "from slime_trace_widget import TraceTimeline\n"
        f"tl = TraceTimeline.from_dump([{str(paths[0])!r}, {str(paths[1])!r}])\ntl",
        "vs = tl.view_state\n"
        "print('DIFF', vs.get('diff'), vs.get('diff_pair'), vs.get('highlight'),"
        " tl.selected.get('name'), tl.selected.get('index'))\n"
        f"tl.to_html({str(snapshot)!r})",
        f"one = TraceTimeline.from_dump({str(paths[0])!r})\none",
    ])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    notebook = run_first_widget(page, url)
    root = page.locator(FIRST)
    assert root.evaluate("el => el.stwDebug.diff().open") is False
    toggle = root.locator(".stw-diff-btn")
    assert toggle.is_visible() and toggle.get_attribute("aria-pressed") == "false"
    toggle.click()
    _check_table(page, FIRST)
    assert toggle.get_attribute("aria-pressed") == "true"
    _pick_and_check(page, FIRST, "tool", "a", slow_a)
    _pick_and_check(page, FIRST, "tool", "b", slow_b)
    view = root.evaluate("el => el.stwDebug.state()")
    # Each rollout drawn from its own start: the view spans A's 2-4 s and B's 2-9 s tools.
    assert view["viewStart"] <= 2 and view["viewEnd"] >= 9

    expected = f"DIFF True [0, 1] tool tool {slow_b}"
    for _ in range(STATE_TRIES):  # view_state is written ~250 ms after the change
        notebook.run_cell(1)
        if expected in notebook.output_text(1):
            break
    assert expected in notebook.output_text(1)
    assert snapshot.exists()

    notebook.run_cell(2)
    third = ".jp-Cell:nth-child(3) .stw-root"
    page.wait_for_selector(f'{third}[data-ready="1"]', timeout=60_000)
    assert not page.locator(f"{third} .stw-diff-btn").is_visible(), "one rollout: no diff"
    page.close()

    with opened(chromium, snapshot) as snap:
        diff = _debug(snap, "debug.diff()")
        assert diff["open"] is True and diff["pair"] == [0, 1]
        _check_table(snap, ".stw-root")
        _pick_and_check(snap, ".stw-root", "tool", "a", slow_a)
        snap.locator(".stw-details").get_by_text("tool").first.wait_for(timeout=10_000)
        _pick_and_check(snap, ".stw-root", "tool", "b", slow_b)
        snap.locator(".stw-diffpanel .stw-icon-btn").click()
        assert _debug(snap, "debug.diff()")["open"] is False
        assert snap.locator(".stw-diffpanel").is_hidden()


def test_three_rollouts_offer_two_selects_and_restore_the_pair(chromium: Any,
                                                               tmp_path: Path) -> None:
    paths = [tmp_path / f"rollout_{k}.pt" for k in (1, 2, 3)]
    for path, samples, rollout in zip(paths, (samples_a(), samples_b(), samples_a()), (1, 2, 3),
                                      strict=True):
        save_dump(path, samples, rollout_id=rollout)
    tl = TraceTimeline.from_dump(paths)
    tl.view_state = {"diff": True, "diff_pair": [1, 2]}
    snapshot = tl.to_html(tmp_path / "three.html")
    with opened(chromium, snapshot) as page:
        diff = _debug(page, "debug.diff()")
        assert diff["pair"] == [1, 2]
        assert diff["rows"][0]["name"] == "generate"  # B is rollout 1 again: tool got faster
        assert diff["rows"][-1]["name"] == "tool" and diff["rows"][-1]["totalDiff"] == -10
        selects = page.locator(".stw-diffpanel .stw-diff-pair select")
        assert selects.count() == 2
        assert [selects.nth(k).input_value() for k in (0, 1)] == ["1", "2"]
        selects.nth(0).select_option("0")  # rollout 1 against its copy: nothing changed
        page.wait_for_function(
            "() => document.querySelector('.stw-root').stwDebug.diff().pair[0] === 0")
        rows = _debug(page, "debug.diff().rows")
        assert rows and all(r["totalDiff"] == 0 for r in rows)
        assert [r["name"] for r in rows] == sorted(r["name"] for r in rows)


def _tool_row(page: Any) -> dict[str, Any]:
    rows = _debug(page, "debug.diff().rows")
    return next(r for r in rows if r["name"] == "tool")


def test_the_diff_covers_what_the_filter_leaves(chromium: Any, tmp_path: Path) -> None:
    """A saved query hides B's 7 s tool: the table counts B's 6 s one only, picks it,
    says what it covers, and follows the filter box when it is cleared. The flame
    view, open from the start, is built over the filtered spans too."""
    paths = [tmp_path / "rollout_1.pt", tmp_path / "rollout_2.pt"]
    save_dump(paths[0], samples_a(), rollout_id=1)
    save_dump(paths[1], samples_b(), rollout_id=2)
    slow_a, slow_b = _slowest_tools(paths)
    tl = TraceTimeline.from_dump(paths)
    tl.view_state = {"diff": True, "filter": "duration<6.5s", "flame": True}
    snapshot = tl.to_html(tmp_path / "filtered.html")
    with opened(chromium, snapshot) as page:
        diff = _debug(page, "debug.diff()")
        assert "counting only the spans it matches" in diff["scope"]
        frames = _debug(page, "debug.flame().frames")
        assert [(f["path"], f["count"]) for f in frames if "tool" in f["path"]] == [("tool", 3)]
        tool = _tool_row(page)
        assert tool["a"]["count"] == 2 and tool["b"]["count"] == 1
        assert tool["b"]["total"] == pytest.approx(6)
        six = tool["b"]["slowest"]
        assert six != slow_b
        assert "the filter leaves" in page.locator(".stw-diffpanel").inner_text()
        _pick_and_check(page, ".stw-root", "tool", "a", slow_a)
        _pick_and_check(page, ".stw-root", "tool", "b", six)
        box = page.locator(".stw-root .stw-input")
        box.fill("")
        box.press("Enter")
        page.wait_for_function(
            "() => document.querySelector('.stw-root').stwDebug.diff().rows"
            ".find((r) => r.name === 'tool').b.count === 2", timeout=30_000)
        assert _tool_row(page)["b"]["slowest"] == slow_b
        assert _debug(page, "debug.diff().scope").startswith("over all 4 samples")
