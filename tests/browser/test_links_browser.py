"""Link arrows in headless Chromium: the widget in real JupyterLab and the snapshot
from ``file://``, on the hand-built scene of tests/answers/test_links.py.

Selecting a group span draws arrows to the two other copies (and the panel lists
them as buttons that select them); selecting the second ``attempt_start`` draws
one arrow, to the first; selecting the first draws its arrow back to attempt 0's
first span and the one from the retry after it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget.frames import TraceFrames, build_frames
from slime_trace_widget.view.page.snapshot import write_snapshot
from slime_trace_widget.view.payload import encode
from tests.answers.test_links import scene_samples
from tests.browser.notebooks import FIRST_WIDGET, run_first_widget, samples_notebook
from tests.browser.test_snapshot_browser import opened
from tests.support.browser import VIEWPORT, JupyterLab

pytestmark = pytest.mark.browser


def _payload_index(indices: Any, label: int) -> int:
    return int(list(indices).index(label))


def _expected(frames: TraceFrames) -> dict[str, Any]:
    """Payload indices of the group copies and the retry events (the widget encodes as
    ``encode(frames)`` does)."""
    view = encode(frames)
    core, events = frames.span_core, frames.event_core
    copies = core[core["name"] == "group_rm"].sort_values("sample_row")
    group = [_payload_index(view.span_index, label)
             for label in copies.index[copies["sample_row"] < 3]]
    retries = events[events["name"] == "attempt_start"].sort_values("ts")
    first_generate = core[(core["name"] == "generate")].sort_values("start").index[0]
    return {"group": group,
            "retries": [_payload_index(view.event_index, label) for label in retries.index],
            "first_generate": _payload_index(view.span_index, first_generate)}


def _debug(root: Any, script: str, arg: Any = None) -> Any:
    return root.evaluate(f"(el, arg) => ((debug, arg) => {script})(el.stwDebug, arg)", arg)


def _click(root: Any, kind: str, index: int, sample: int) -> None:
    """Click near the start of span ``index`` (clear of its children) or on event
    ``index``, with its row scrolled into view."""
    _debug(root, "debug.scrollToRow(debug.rowOfSample(arg))", sample)
    rect = _debug(root, f"debug.{kind}Rect(arg)", index)
    assert rect, f"{kind} {index} is not on screen"
    x = rect["x"] + (min(rect["w"] / 2, 6) if kind == "span" else rect["w"] / 2)
    root.page.mouse.click(x, rect["y"] + rect["h"] / 2)


def _arrows(root: Any, count: int) -> list[dict[str, Any]]:
    """The arrows drawn once ``count`` of them are (waited for, never slept)."""
    root.page.wait_for_function(
        "([el, n]) => el.stwDebug.links().length === n", arg=[root.element_handle(), count],
        timeout=30_000)
    return _debug(root, "debug.links()")


def _check(root: Any, want: dict[str, Any]) -> None:
    group = want["group"]
    _click(root, "span", group[0], 0)
    arrows = _arrows(root, 2)
    assert {a["kind"] for a in arrows} == {"group"}
    assert sorted(a["to"]["index"] for a in arrows) == sorted(group[1:])
    assert all(a["from"] == {"kind": "span", "index": group[0]} for a in arrows)
    for arrow in arrows:  # visible, downwards to the members' rows
        assert arrow["y1"] > arrow["y0"] and not arrow["cutFrom"]
    links = root.locator(".stw-details .stw-links")
    assert links.locator("div").first.text_content() == "2 other members"
    links.locator("button").nth(1).click()  # select another member from the panel
    root.page.wait_for_function(
        "([el, i]) => el.stwDebug.state().selected?.index === i",
        arg=[root.element_handle(), group[2]], timeout=30_000)
    assert sorted(a["to"]["index"] for a in _arrows(root, 2)) == sorted(group[:2])

    first, second = want["retries"]
    _click(root, "event", second, 3)
    (back,) = _arrows(root, 1)
    assert back["kind"] == "attempt"
    assert back["from"] == {"kind": "event", "index": second}
    assert back["to"] == {"kind": "event", "index": first}
    assert back["x1"] < back["x0"]  # back in time
    prev = root.locator(".stw-details .stw-sec", has_text="Links").locator("button")
    assert prev.count() == 1 and prev.text_content().startswith("attempt_start")
    _click(root, "event", first, 3)
    arrows = _arrows(root, 2)
    assert sorted((a["from"]["kind"], a["from"]["index"], a["to"]["kind"], a["to"]["index"])
                  for a in arrows) == sorted([("event", first, "span", want["first_generate"]),
                                              ("event", second, "event", first)])


def test_snapshot_draws_the_links(chromium: Any, tmp_path: Path) -> None:
    frames = build_frames(scene_samples())
    path = write_snapshot(tmp_path / "links.html", frames)
    with opened(chromium, path) as page:
        _check(page.locator(".stw-root"), _expected(frames))


def test_notebook_draws_the_links(lab: JupyterLab, chromium: Any) -> None:
    samples = scene_samples()
    url = samples_notebook(lab, samples, "links")
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        run_first_widget(page, url)
        root = page.locator(f'{FIRST_WIDGET}[data-ready="1"]')
        _check(root, _expected(build_frames(samples)))
    finally:
        page.close()
