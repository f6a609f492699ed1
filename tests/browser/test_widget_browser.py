"""The real widget in real JupyterLab, driven by Playwright in headless Chromium."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from slime_trace_widget.sources.dumps import save_dump
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.payload import encode
from tests.browser.notebooks import FIRST_WIDGET, run_first_widget
from tests.support.browser import VIEWPORT, JupyterLab

pytestmark = pytest.mark.browser

FIXTURES = Path(__file__).parents[1] / "fixtures"
ARTIFACTS = Path(__file__).parents[2] / "test-artifacts"
HOSTILE_ATTR = '<img src=x onerror="window.__pwned=1">'
HOSTILE_NAME = "<script>window.__pwned=2</script>gen"


def _hostile_dump(path: Path) -> Path:
    t = 1_767_225_600.0
    records = [
        {"type": "span_start", "name": HOSTILE_NAME, "ts": t, "trace_id": "h", "sample_id": 0,
         "group_id": 0, "attempt": 0, "span_id": "s1", "attrs": {"html": HOSTILE_ATTR}},
        {"type": "span_end", "name": HOSTILE_NAME, "ts": t + 5, "trace_id": "h", "sample_id": 0,
         "group_id": 0, "attempt": 0, "span_id": "s1",
         "attrs": {"js": "javascript:alert(1)", "css": "</style><style>*{display:none}"}},
    ]
    sample = {"index": 0, "group_index": 0, "status": "completed", "label": HOSTILE_ATTR,
              "metadata": {"source": "<b>src</b>"},
              "trace": {"version": 1, "trace_id": "h", "sample_id": 0, "group_id": 0,
                        "attempt": 0, "events": records}}
    save_dump(path, [sample], rollout_id=1)
    return path


def _payload_index(frames, sample_row: int, name: str) -> int:
    view = encode(frames)
    spans = frames.span_core
    for position, frame_index in enumerate(view.span_index):
        span = spans.loc[frame_index]
        if span["sample_row"] == sample_row and span["name"] == name:
            return position
    raise AssertionError(f"no {name} in sample {sample_row}")


def _click_span(page, root_selector: str, index: int) -> None:
    root = page.locator(root_selector)
    root.evaluate("(el, i) => el.stwDebug.scrollToRow(0)", index)
    rect = root.evaluate("(el, i) => el.stwDebug.spanRect(i)", index)
    assert rect, f"span {index} is not on screen"
    page.mouse.click(rect["x"] + min(rect["w"] / 2, 20), rect["y"] + rect["h"] / 2)


def test_timeline_in_jupyterlab(lab: JupyterLab, chromium, tmp_path: Path) -> None:
    dump = lab.notebooks / "small.pt"
    shutil.copy(FIXTURES / "small.pt", dump)
    hostile = _hostile_dump(lab.notebooks / "hostile.pt")
    rollout3 = lab.notebooks / "rollout_3.pt"
    shutil.copy(FIXTURES / "legacy_v1_pd.pt", rollout3)
    frames = load_frames(dump)
    target = _payload_index(frames, 0, "sglang_generate")
    low_reward = int((frames.samples["reward"] < 0.5).sum())
    url = lab.write_notebook("widget.ipynb", [
        "from slime_trace_widget import TraceTimeline\n"
        f"tl = TraceTimeline.from_dump({str(dump)!r})\ntl",
        "print('SELECTED=' + str(tl.selected_span['name']) + '|' + str(tl.selected['span_id']))",
        "tl.show(samples=tl.samples.query('reward < 0.5'))\n"
        "print('ROWS', len(tl.view.sample_rows))",
        f"h = TraceTimeline.from_dump({str(hostile)!r})\nh",
        "tl.view_range = [1.0, 3.0]",
        "print('RANGE', tl.view_range)",
        f"both = TraceTimeline.from_dump([{str(dump)!r}, {str(rollout3)!r}])\n"
        "print('ALIGN', both.payload['meta']['align'])\nboth",
    ])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    notebook = run_first_widget(page, url)
    first = FIRST_WIDGET
    root = page.locator(first)
    assert root.get_attribute("data-rows") == "8"
    assert int(root.get_attribute("data-drawn-rows")) > 0

    _click_span(page, first, target)
    details = page.locator(".jp-Cell:nth-child(1) .stw-details")
    details.get_by_text("prompt_tokens").first.wait_for(timeout=30_000)
    assert "sglang_generate" in details.inner_text()

    notebook.run_cell(1)
    span_id = frames.span_core.loc[encode(frames).span_index[target], "span_id"]
    assert f"SELECTED=sglang_generate|{span_id}" in notebook.output_text(1)

    notebook.run_cell(2)
    assert f"ROWS {low_reward}" in notebook.output_text(2)
    page.wait_for_function(
        "([sel, n]) => document.querySelector(sel)?.dataset.rows === String(n)",
        arg=[first, low_reward], timeout=30_000)
    assert f"{low_reward} of 8 samples" in page.locator(f"{first} .stw-header").inner_text()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-timeline.png"))

    notebook.run_cell(3)
    second = ".jp-Cell:nth-child(4) .stw-root"
    page.wait_for_selector(f'{second}[data-ready="1"]', timeout=60_000)
    _click_span(page, second, 0)
    hostile_panel = page.locator(".jp-Cell:nth-child(4) .stw-details")
    hostile_panel.get_by_text(HOSTILE_ATTR).first.wait_for(timeout=30_000)
    assert HOSTILE_NAME in page.locator(".jp-Cell:nth-child(4)").inner_text()
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator(".jp-Cell:nth-child(4) .stw-root img").count() == 0
    assert page.locator(".jp-Cell:nth-child(4) .stw-root script").count() == 0
    assert dialogs == []
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-hostile.png"))

    # view_range is two-way: Python zooms the view, the user's zoom comes back
    notebook.run_cell(4)
    page.wait_for_function(
        "sel => Math.abs(document.querySelector(sel).stwDebug.state().viewStart - 1) < 1e-3",
        arg=first, timeout=30_000)
    state = root.evaluate("el => el.stwDebug.state()")
    assert abs(state["viewEnd"] - 3.0) < 1e-3
    root.locator(".stw-scroll canvas").first.click(position={"x": 700, "y": 10})
    page.keyboard.press("w")
    page.wait_for_function(
        "sel => document.querySelector(sel).stwDebug.state().viewEnd - "
        "document.querySelector(sel).stwDebug.state().viewStart < 1.99",
        arg=first, timeout=30_000)
    page.wait_for_timeout(600)  # the front end debounces view_range writes
    notebook.run_cell(5)
    reported = notebook.output_text(5)
    start, end = (float(x) for x in reported.split("[")[1].split("]")[0].split(","))
    assert end - start < 1.99 and (start, end) != (1.0, 3.0)

    # comparison view: two dumps, each drawn from its own start
    notebook.run_cell(6)
    assert "ALIGN rollout" in notebook.output_text(6)
    third = ".jp-Cell:nth-child(7) .stw-root"
    page.wait_for_selector(f'{third}[data-ready="1"]', timeout=60_000)
    assert page.locator(third).get_attribute("data-rows") == "16"
    assert "16 of 16 samples" in page.locator(f"{third} .stw-header").inner_text()
    compared = encode(load_frames([dump, rollout3]), align="rollout")
    later = int(np.flatnonzero(compared.span_index >= len(frames.span_core))[0])
    rect = page.locator(third).evaluate("(el, i) => el.stwDebug.spanRect(i)", later)
    assert rect and rect["w"] > 1, "the second rollout is drawn from its own start"
    page.locator(third).scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-compare.png"))
    # anywidget warns when the module exports `render` by name (it wants the default export)
    assert console, "the page's console is heard"
    assert not [m for m in console if "deprecat" in m.lower()], console
    page.close()


#: The canvas is as wide as the rows area (the container), and that is not 0.
FITS = """el => {
  const scroll = el.querySelector('.stw-scroll');
  const canvas = el.querySelector('.stw-canvas');
  return scroll.clientWidth > 0
    && parseFloat(canvas.style.width) === Math.max(200, scroll.clientWidth);
}"""


def test_zero_width_frames_are_skipped(lab: JupyterLab, chromium) -> None:
    """A width of 0 (a theme CSS swap, a hidden output) is never painted at, and the
    canvas fits its container again once the width is back, even when the width came
    back before the resize observer looked (it then reports nothing)."""
    dump = lab.notebooks / "width.pt"
    shutil.copy(FIXTURES / "small.pt", dump)
    url = lab.write_notebook("width.ipynb", [
        f"from slime_trace_widget import TraceTimeline\nTraceTimeline.from_dump({str(dump)!r})",
    ])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    # &reset: only this notebook, no tab restored from the workspace
    run_first_widget(page, url + "&reset")
    root = page.locator(f'{FIRST_WIDGET}[data-ready="1"]')
    handle = root.element_handle()
    page.wait_for_function(FITS, arg=handle, timeout=30_000)
    width = root.evaluate("el => el.querySelector('.stw-canvas').style.width")

    # 0 for one frame: set in the animation frame before the widget's, restored in the
    # one after, so layout reads 0 only inside the widget's frame.
    skipped = root.evaluate("""async el => {
      const frame = () => new Promise(r => requestAnimationFrame(r));
      await frame();
      const before = el.stwDebug.skippedFrames;
      requestAnimationFrame(() => { el.style.width = '0px'; });
      el.stwDebug.repaint();
      requestAnimationFrame(() => { el.style.width = ''; });
      await frame();
      return el.stwDebug.skippedFrames - before;
    }""")
    assert skipped == 1, "the frame that read 0 was skipped"
    page.wait_for_function(FITS, arg=handle, timeout=30_000)
    assert root.evaluate("el => el.querySelector('.stw-canvas').style.width") == width

    # 0 for a while: nothing is painted at it, and the width that comes back is used.
    root.evaluate("el => { el.style.width = '0px'; }")
    page.wait_for_function("el => el.stwDebug.skippedFrames >= 3", arg=handle, timeout=30_000)
    assert root.evaluate("el => el.querySelector('.stw-canvas').style.width") == width
    root.evaluate("el => { el.style.width = '700px'; }")
    page.wait_for_function(FITS, arg=handle, timeout=30_000)
    assert root.evaluate("el => el.querySelector('.stw-scroll').clientWidth") < 700
    root.evaluate("el => { el.style.width = ''; }")
    page.wait_for_function(FITS, arg=handle, timeout=30_000)
    assert root.evaluate("el => el.querySelector('.stw-canvas').style.width") == width
    page.close()
