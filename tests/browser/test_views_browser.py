"""The critical path toggle and the flame view in JupyterLab, then in the ``to_html``
snapshot of that widget opened from ``file://`` (``view_state`` restores both).

The trace is hand-built (tests/answers/test_views_fixture.py): two agents whose
critical path is rollout, generate, its [P]/[D] phases, the tool that ended last
and the reward; and a retry with an open span.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.payload import encode
from tests.answers.test_critical_and_flame import _agent
from tests.answers.test_views_fixture import _retry_and_open
from tests.support.browser import (
    VIEWPORT,
    JupyterLab,
    NotebookPage,
    PageGuard,
    file_only,
)

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).parents[2] / "test-artifacts"
FIRST = ".jp-Cell:nth-child(1) .stw-root"
SNAPSHOT = '.stw-root[data-ready="1"]'
AGENT_PATH = [["rollout", 0], ["generate", 0], ["generate [P]", 1], ["generate [D]", 3],
              ["tool", 5], ["reward", 1]]


def _dump(path: Path) -> tuple[Path, int]:
    """The dump and the payload index of sample 0's reward span."""
    save_dump(path, [_agent(0), _agent(1), _retry_and_open(2)], rollout_id=1)
    frames = load_frames(path)
    view = encode(frames)
    spans = frames.span_core.loc[view.span_index]
    hits = [k for k, (row, name) in enumerate(zip(spans["sample_row"], spans["name"], strict=True))
            if row == 0 and name == "reward"]
    return path, hits[0]


def _click_span(page: Any, root: Any, index: int) -> None:
    rect = root.evaluate("(el, i) => el.stwDebug.spanRect(i)", index)
    assert rect, f"span {index} is not on screen"
    page.mouse.click(rect["x"] + rect["w"] / 2, rect["y"] + rect["h"] / 2)


def _toggle(root: Any, label: str) -> None:
    root.locator("label.stw-check", has_text=label).locator("input").click()


def _wait(page: Any, selector: str, condition: str, arg: Any = None) -> None:
    """Wait until ``condition`` (JS over ``d = root.stwDebug``) holds."""
    page.wait_for_function(
        f"([sel, arg]) => {{ const d = document.querySelector(sel)?.stwDebug; "
        f"return !!d && ({condition}); }}", arg=[selector, arg], timeout=30_000)


def _critical_on_reward(page: Any, selector: str, reward: int) -> None:
    """Select the reward span with the toggle on: only its sample's path stays bright."""
    root = page.locator(selector)
    _click_span(page, root, reward)
    _wait(page, selector, "d.critical().path.length === 6")
    path = root.evaluate("el => el.stwDebug.critical().path")
    assert [[p["name"], round(p["critical"], 4)] for p in path] == AGENT_PATH
    counts = root.evaluate("el => el.stwDebug.visCounts()")
    assert counts["shown"] == 6 and counts["dimmed"] > 6 and counts["hidden"] == 0, counts
    panel = root.locator(".stw-critical").inner_text()
    assert "critical path · 6 steps" in panel and "50.0%" in panel  # the tool: 5 s of 10


def _click_frame(page: Any, selector: str, path: str, chosen: str | None) -> None:
    """Click the frame of ``path``; then ``chosen`` is the view's chosen path."""
    root = page.locator(selector)
    _wait(page, selector, "d.flame().frames.some((f) => f.path === arg && f.rect)", path)
    frames = root.evaluate("el => el.stwDebug.flame().frames")
    rect = next(f["rect"] for f in frames if f["path"] == path)
    page.mouse.click(rect["x"] + rect["w"] / 2, rect["y"] + rect["h"] / 2)
    _wait(page, selector, "d.flame().path === arg", chosen)


def test_critical_path_and_flame_in_jupyterlab_and_snapshot(lab: JupyterLab, chromium: Any,
                                                            tmp_path: Path) -> None:
    dump, reward = _dump(lab.notebooks / "views.pt")
    html = tmp_path / "views.html"
    url = lab.write_notebook("views.ipynb", [
        "import json\nfrom slime_trace_widget import TraceTimeline\n"
        f"tl = TraceTimeline.from_dump({str(dump)!r})\ntl",
        "print('SELECTED=' + json.dumps(tl.selected, sort_keys=True))",
        "print('FLAME_PATH=' + str(tl.view_state.get('flame_path')))",
        f"print('WROTE', tl.to_html({str(html)!r}))",
    ])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    notebook = NotebookPage(page)
    notebook.open(url)
    notebook.run_cell(0)
    page.wait_for_selector(f'{FIRST}[data-ready="1"]', timeout=60_000)
    root = page.locator(FIRST)

    _toggle(root, "critical path")
    _critical_on_reward(page, FIRST, reward)

    # The flame view of every shown row; a frame's spans are the focus.
    _toggle(root, "flame")
    _click_frame(page, FIRST, "rollout;tool", "rollout;tool")
    flame = root.evaluate("el => el.stwDebug.flame()")
    tools = next(f for f in flame["frames"] if f["path"] == "rollout;tool")
    assert tools["count"] == 4 and abs(tools["total"] - 16) < 1e-3
    assert root.evaluate("el => el.stwDebug.visCounts().shown") == 4
    ARTIFACTS.mkdir(exist_ok=True)
    root.screenshot(path=str(ARTIFACTS / "jupyterlab-flame.png"))
    notebook.run_cell(1)
    selected = json.loads(notebook.output_text(1).split("SELECTED=", 1)[1].strip())
    assert selected["kind"] == "flame" and selected["path"] == "rollout;tool", selected
    assert selected["count"] == 4 and abs(selected["total"] - 16) < 1e-3
    assert abs(selected["self"] - 16) < 1e-3

    # view_state is written ~250 ms after a change: ask until the kernel has it.
    for _ in range(20):
        notebook.run_cell(2)
        if "FLAME_PATH=rollout;tool" in notebook.output_text(2):
            break
    assert "FLAME_PATH=rollout;tool" in notebook.output_text(2)
    notebook.run_cell(3)
    assert "WROTE" in notebook.output_text(3)

    # Esc clears the frame: nothing dims, `selected` is empty again.
    root.focus()  # running cells moved the focus to the notebook: back to the widget
    page.keyboard.press("Escape")
    _wait(page, FIRST, "d.flame().path === null && d.visCounts().dimmed === 0")
    notebook.run_cell(1)
    assert "SELECTED={}" in notebook.output_text(1)
    page.close()

    snap = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    guard = PageGuard(snap, file_only)
    try:
        snap.goto(html.resolve().as_uri())
        snap.wait_for_selector(SNAPSHOT, timeout=30_000)
        sroot = snap.locator(".stw-root")
        assert sroot.locator("label.stw-check", has_text="critical path").locator(
            "input").is_checked()
        assert sroot.locator("label.stw-check", has_text="flame").locator("input").is_checked()
        _wait(snap, ".stw-root", "d.flame().path === 'rollout;tool' && d.visCounts().shown === 4")
        # Clicking the chosen frame again clears it; a span with the toggle on shows its path.
        _click_frame(snap, ".stw-root", "rollout;tool", None)
        frames = sroot.evaluate("el => el.stwDebug.flame()")
        assert frames["path"] is None and frames["chosen"] == -1
        _critical_on_reward(snap, ".stw-root", reward)
        sroot.screenshot(path=str(ARTIFACTS / "snapshot-critical.png"))
        guard.check()
    finally:
        snap.close()
