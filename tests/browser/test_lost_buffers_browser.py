"""Lost buffers in real JupyterLab: the payload reaches the front end without its binary
buffers, as Colab's widget manager leaves it, and the widget still draws every row and
span, from the inline copy it asks the kernel for (``payload_inline``).

The loss is made on the kernel side, so the front end runs unchanged: the cell sets the
``payload`` trait to the shown payload minus its buffers, while the widget's view (what
the kernel answers from) keeps them. The base64 form marimo uses is drawn as it comes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.payload import encode
from tests.browser.notebooks import FIRST_WIDGET, run_first_widget
from tests.browser.test_widget_browser import _click_span, _payload_index
from tests.support.browser import VIEWPORT, JupyterLab

pytestmark = pytest.mark.browser

FIXTURES = Path(__file__).parents[1] / "fixtures"
ARTIFACTS = Path(__file__).parents[2] / "test-artifacts"
LOST = "did not arrive"
DROP = 'tl.payload = {**tl.payload, "buffers": {}}  # what reaches the front end in Colab\n'


def test_lost_buffers_are_fetched_inline(lab: JupyterLab, chromium) -> None:
    dump = lab.notebooks / "lost.pt"
    shutil.copy(FIXTURES / "small.pt", dump)
    frames = load_frames(dump)
    everything = encode(frames)
    low = frames.samples.query("reward < 0.5")
    filtered = encode(frames, samples=low)
    url = lab.write_notebook("lost.ipynb", [
        "from slime_trace_widget import TraceTimeline\n"
        f"tl = TraceTimeline.from_dump({str(dump)!r})\n" + DROP + "tl",
        "tl.show(samples=tl.samples.query('reward < 0.5'))\n" + DROP,
        "import base64\ntl.show()\n"
        "tl.payload = {**tl.payload, 'buffers': {k: base64.b64encode(v).decode()"
        " for k, v in tl.payload['buffers'].items()}}  # marimo's form",
    ])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    notebook = run_first_widget(page, url + "&reset")
    locator = page.locator(f'{FIRST_WIDGET}[data-ready="1"]')
    root = locator.element_handle()
    assert locator.get_attribute("data-rows") == "8"
    assert locator.get_attribute("data-drawn-rows") == "8"
    footer = page.locator(".jp-Cell:nth-child(1) .stw-root .stw-footer")
    n_spans = len(everything.span_index)
    assert f"{n_spans} spans · {len(everything.event_index)} events" in footer.inner_text()
    assert len([m for m in console if LOST in m]) == 1, "the loss was seen, and a copy asked for"
    # the spans are where the kernel's payload puts them, and clicking one gets its details
    target = _payload_index(frames, 0, "sglang_generate")
    _click_span(page, ".jp-Cell:nth-child(1) .stw-root", target)
    details = page.locator(".jp-Cell:nth-child(1) .stw-details")
    details.get_by_text("prompt_tokens").first.wait_for(timeout=30_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "jupyterlab-lost-buffers.png"))

    # a later payload that loses its buffers too: drawn once its copy is here
    notebook.run_cell(1)
    page.wait_for_function(
        "([el, n]) => el.dataset.rows === String(n) && el.dataset.drawnRows === String(n)",
        arg=[root, len(low)], timeout=30_000)
    page.wait_for_function("([el, text]) => el.querySelector('.stw-footer').innerText"
                           ".includes(text)",
                           arg=[root, f"{len(filtered.span_index)} spans"], timeout=30_000)
    assert len([m for m in console if LOST in m]) == 2

    # base64 text buffers decode as they are: no copy is asked for
    notebook.run_cell(2)
    page.wait_for_function("([el, n]) => el.dataset.rows === String(n)", arg=[root, 8],
                           timeout=30_000)
    page.wait_for_function("([el, text]) => el.querySelector('.stw-footer').innerText"
                           ".includes(text)", arg=[root, f"{n_spans} spans"], timeout=30_000)
    assert len([m for m in console if LOST in m]) == 2
    assert errors == []
    page.close()
