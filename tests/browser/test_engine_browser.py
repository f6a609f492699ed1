"""Engine traces in Chromium: the widget in JupyterLab and the snapshot from file:// draw
the engine's lanes under a generation, list the engine's names in a legend group of
their own, and break a generation's time into engine phases in the details panel."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.devtools.browser import VIEWPORT, JupyterLab
from slime_trace_widget.devtools.engine_traces import requests_for
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.payload import encode
from tests.browser.notebooks import FIRST_WIDGET, run_first_widget
from tests.browser.test_snapshot_browser import opened
from tests.frames.test_engine_join import SKEWS, store_requests

pytestmark = pytest.mark.browser

LEGEND_GROUP = "engine (SGLang's own trace of each request)"
ROOT = Path(__file__).parents[2]


def _scene(folder: Path) -> tuple[Path, Path, int, int, int]:
    """A dump, its engine traces (PD, two skewed hosts), the payload index of a
    generation span with an engine request under it, its row, and the payload index
    of the request's decode slice."""
    dump = write_demo_dump(folder / "engine_rollout.pt", n_samples=6, seed=8)
    frames = load_frames(str(dump), progress=False)
    requests = requests_for(frames, pd=True, hosts=tuple(SKEWS))
    engine = store_requests(requests, folder / "engine_traces", SKEWS)
    joined = load_frames(str(dump), progress=False, engine_traces=str(engine))
    generation = requests[0].span
    order = list(encode(joined).span_index)
    core = joined.span_core
    halves = core.index[(core["parent_index"] == generation) & (core["origin"] == "engine")]
    decode = core.index[core["parent_index"].isin(halves) & (core["name"] == "decode_loop")][0]
    return (dump, engine, order.index(generation), int(core.at[generation, "sample_row"]),
            order.index(decode))


def _check(page: Any, root_selector: str, position: int, row: int, slice_position: int,
           expand: bool = False) -> None:
    root = page.locator(root_selector)
    assert LEGEND_GROUP in root.locator(".stw-legend").inner_text()
    root.evaluate("(el, i) => el.stwDebug.scrollToRow(el.stwDebug.rowOfSample(i))", row)
    if expand:  # a click on the row's label, as a person expands it
        rect = root.evaluate("(el, i) => el.stwDebug.spanRect(i)", position)
        canvas = root.locator("canvas").first.bounding_box()
        page.mouse.click(canvas["x"] + 8, rect["y"] + rect["h"] / 2)
        page.wait_for_function("([el, i]) => !!el.stwDebug.spanRect(i)",
                               arg=[root.element_handle(), slice_position], timeout=30_000)
    # the row is expanded: the engine's decode slice has a lane of its own on screen
    assert root.evaluate("(el, i) => el.stwDebug.spanRect(i)", slice_position)
    rect = root.evaluate("(el, i) => el.stwDebug.spanRect(i)", position)
    assert rect, "the generation span is not on screen"
    page.mouse.click(rect["x"] + min(rect["w"] / 2, 20), rect["y"] + rect["h"] / 2)
    details = root.locator(".stw-details")
    details.get_by_text("Engine phases").wait_for(timeout=30_000)
    table = details.locator(".stw-engine-phases")
    text = table.inner_text()
    assert "decode" in text and "pd" in text and "%" in text


def test_widget_shows_engine_lanes_legend_and_phases(lab: JupyterLab, chromium: Any) -> None:
    dump, engine, position, row, slice_position = _scene(lab.notebooks)
    url = lab.write_notebook("engine.ipynb", [
        "from slime_trace_widget import TraceTimeline\n"
        f"tl = TraceTimeline.from_dump({str(dump)!r}, engine_traces={str(engine)!r})\n"
        f"tl.view_state = {{**tl.view_state, 'expanded': [{row}]}}\ntl",
    ])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        run_first_widget(page, url)
        root = page.locator(f'{FIRST_WIDGET}[data-ready="1"]')
        assert int(root.get_attribute("data-drawn-rows") or 0) >= 1
        _check(page, FIRST_WIDGET, position, row, slice_position)
    finally:
        page.close()


def test_snapshot_shows_engine_lanes_legend_and_phases(chromium: Any, tmp_path: Path) -> None:
    from slime_trace_widget import TraceTimeline

    dump, engine, position, row, slice_position = _scene(tmp_path)
    timeline = TraceTimeline.from_dump(str(dump), engine_traces=engine)
    timeline.view_state = {**timeline.view_state, "expanded": [row]}
    path = Path(timeline.to_html(tmp_path / "engine.html"))
    with opened(chromium, path) as page:
        _check(page, ".stw-root", position, row, slice_position)


def test_cli_page_shows_engine_lanes_legend_and_phases(chromium: Any, tmp_path: Path) -> None:
    dump, engine, position, row, slice_position = _scene(tmp_path)
    out = tmp_path / "page"
    subprocess.run([sys.executable, "-m", "slime_trace_widget", str(dump), "--no-serve",
                    "--out-dir", str(out), "--engine-traces", str(engine)],
                   check=True, capture_output=True, text=True, timeout=600, cwd=ROOT)
    page_path = next(out.glob("*.html"))
    with opened(chromium, page_path) as page:
        _check(page, ".stw-root", position, row, slice_position, expand=True)
