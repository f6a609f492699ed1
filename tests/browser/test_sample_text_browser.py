"""A sample's long texts in the details panel, in headless Chromium: the widget in
real JupyterLab (the whole text comes from the kernel over the comm) and the
snapshot from ``file://`` (it comes from the page).

Clicking a span shows the start of its sample's prompt and response with a note
of how much is left out; "show all" shows the rest, "show less" the start again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget.demo import make_demo_samples
from slime_trace_widget.frames import build_frames
from slime_trace_widget.view.details import TEXT_PREVIEW_CHARS
from slime_trace_widget.view.page.snapshot import SNAPSHOT_MAX_CHARS, write_snapshot
from tests.browser.notebooks import FIRST_WIDGET, run_first_widget, samples_notebook
from tests.browser.test_snapshot_browser import opened
from tests.support.browser import VIEWPORT, JupyterLab

pytestmark = pytest.mark.browser

EMOJI = "\U0001F600"


def _samples() -> list[dict[str, Any]]:
    """Demo samples whose prompts are long (past the snapshot's cut) and start and end
    with their row, and whose responses are emoji, two UTF-16 units each, so lengths
    must be counted in characters to come out right."""
    samples = make_demo_samples(3)
    for row, sample in enumerate(samples):
        sample["prompt"] = f"P{row}:" + "0123456789" * 30_000 + f"|END{row}"
        sample["response"] = EMOJI * 3_000
    return samples


def _field(root: Any, name: str) -> Any:
    return root.locator(".stw-details .stw-text-field").filter(
        has=root.page.locator(".stw-k", has_text=name))


def _select_first_span(root: Any) -> int:
    """Click the first span of the first sample; the frame row of its sample."""
    root.evaluate("(el) => el.stwDebug.scrollToRow(el.stwDebug.rowOfSample(0))")
    rect = root.evaluate("(el) => el.stwDebug.spanRect(0)")
    assert rect, "span 0 is not on screen"
    root.page.mouse.click(rect["x"] + min(rect["w"] / 2, 20), rect["y"] + rect["h"] / 2)
    _field(root, "prompt").wait_for(timeout=30_000)
    return root.evaluate("(el) => el.stwDebug.state().selected.sample_row")


def _shown(field: Any) -> dict[str, str]:
    return {"text": field.locator(".stw-text").text_content(),
            "note": field.locator(".stw-text-note").text_content(),
            "button": field.locator("button").text_content()}


def _show_all(field: Any, chars: int) -> dict[str, str]:
    """Click "show all" and wait until ``chars`` UTF-16 units of text are shown."""
    field.locator("button", has_text="show all").click()
    field.page.wait_for_function(
        "([el, n]) => el.querySelector('.stw-text').textContent.length === n",
        arg=[field.element_handle(), chars], timeout=30_000)
    return _shown(field)


def _check_texts(root: Any, prompt: str, embedded: int, rest: str) -> None:
    """The panel of a selected sample whose prompt is ``prompt``; "show all" gets
    ``embedded`` characters of it, and a note ending in ``rest`` when that is not all."""
    field = _field(root, "prompt")
    head = prompt[:TEXT_PREVIEW_CHARS]
    left = len(prompt) - TEXT_PREVIEW_CHARS
    assert _shown(field) == {
        "text": head, "button": "show all",
        "note": f"first 2,000 of {len(prompt):,} characters, {left:,} left out"}
    shown = _show_all(field, embedded)
    assert shown["text"] == prompt[:embedded] and shown["button"] == "show less"
    assert shown["note"] == ("" if embedded == len(prompt) else
                             f"first {embedded:,} of {len(prompt):,} characters, "
                             f"{len(prompt) - embedded:,} left out {rest}")
    field.locator("button").click()
    assert _shown(field)["text"] == head

    response = _field(root, "response")
    assert _shown(response)["text"] == EMOJI * TEXT_PREVIEW_CHARS
    assert _shown(response)["note"] == "first 2,000 of 3,000 characters, 1,000 left out"
    shown = _show_all(response, 2 * 3_000)
    assert shown["text"] == EMOJI * 3_000 and shown["note"] == ""
    assert root.page.evaluate("() => window.__pwned") is None


def test_snapshot_shows_the_embedded_text(chromium: Any, tmp_path: Path) -> None:
    frames = build_frames(_samples())
    path = write_snapshot(tmp_path / "texts.html", frames)
    with opened(chromium, path) as page:
        root = page.locator(".stw-root")
        row = _select_first_span(root)
        _check_texts(root, frames.samples.at[row, "prompt"], SNAPSHOT_MAX_CHARS,
                     "(the rest is not in this snapshot)")


def test_notebook_fetches_the_whole_text_from_the_kernel(lab: JupyterLab, chromium: Any
                                                         ) -> None:
    samples = _samples()
    url = samples_notebook(lab, samples, "texts")
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        run_first_widget(page, url)
        root = page.locator(f'{FIRST_WIDGET}[data-ready="1"]')
        row = _select_first_span(root)
        prompt = build_frames(samples).samples.at[row, "prompt"]
        _check_texts(root, prompt, len(prompt), "")
    finally:
        page.close()
