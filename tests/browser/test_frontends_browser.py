"""The widget in every notebook front end we can run here: JupyterLab, Notebook 7 and
marimo (edit and run mode), driven by Playwright in headless Chromium.

In each: the widget renders, a click selects a span that Python then reads back,
the details panel gets the span's attributes from the kernel, and ``show()``
narrows the rows. The theme is switched live the way a person does it (Settings >
Theme; marimo's command palette), with a screenshot in each theme under
test-artifacts/: the widget and its canvas must follow the host, light or dark.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.payload import encode
from tests.browser.test_widget_browser import _click_span, _payload_index
from tests.support.browser import (
    KERNEL_CONNECTED,
    VIEWPORT,
    JupyterLab,
    Marimo,
    MarimoPage,
    NotebookPage,
)

pytestmark = pytest.mark.browser

FIXTURES = Path(__file__).parents[1] / "fixtures"
ARTIFACTS = Path(__file__).parents[2] / "test-artifacts"
#: What the page shows around and in the widget: the widget's own background, the
#: first opaque background behind it (the host's, across marimo's shadow root), the
#: colour the canvas painted near its top right corner, and the canvas's width.
COLOURS = """(root) => {
  let host = 'rgba(0, 0, 0, 0)';
  for (let e = root.parentElement || root.getRootNode().host; e;
       e = e.parentElement || e.getRootNode().host) {
    const bg = getComputedStyle(e).backgroundColor;
    if (!/^transparent$|[,/] 0\\)$/.test(bg)) {
      host = bg;
      break;
    }
  }
  const canvas = root.querySelector('canvas.stw-canvas');
  const [r, g, b] = canvas.getContext('2d').getImageData(canvas.width - 4, 4, 1, 1).data;
  return {widget: getComputedStyle(root).backgroundColor, host,
          canvas: `rgb(${r}, ${g}, ${b})`, width: canvas.getBoundingClientRect().width};
}"""

#: Dark first: the page starts light. dark? -> the theme's name in Settings > Theme.
JUPYTER_THEMES = {True: "JupyterLab Dark", False: "JupyterLab Light"}

#: Two animation frames: whatever the widget repaints after a change has landed.
NEXT_FRAMES = """(root) => new Promise((done) =>
  requestAnimationFrame(() => requestAnimationFrame(() => done(root.dataset.ready))))"""


def _luminance(colour: str) -> float:
    """Relative luminance of a computed CSS colour: ``rgb()``/``rgba()`` (0-255) or
    ``color(srgb r g b)`` (0-1), the two forms Chromium reports."""
    numbers = [float(x) for x in re.findall(r"[\d.]+", colour)][:3]
    if colour.startswith("rgb"):
        numbers = [x / 255 for x in numbers]
    linear = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in numbers]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _dark(colour: str) -> bool:
    return _luminance(colour) < 0.2


def _wears(page: Any, root: Any, dark: bool, timeout_ms: int = 60_000) -> bool:
    """Wait until the widget and its canvas look ``dark`` (or light); whether they did.
    A widget that ignores the host never does, so this gives up after ``timeout_ms``."""
    try:
        page.wait_for_function(
            f"""([root, dark]) => {{
              const c = ({COLOURS})(root);
              const lum = (s) => {{
                const n = (s.match(/[\\d.]+/g) || []).slice(0, 3).map(Number);
                const v = s.startsWith('rgb') ? n.map(x => x / 255) : n;
                return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
              }};
              return (lum(c.widget) < 0.2) === dark && (lum(c.canvas) < 0.2) === dark;
            }}""", arg=[root.element_handle(), dark], timeout=timeout_ms)
    except PlaywrightTimeout:
        return False
    return True


def _theme_round(page: Any, root: Any, switch: Any, themes: dict[bool, str], shot: str
                 ) -> dict[bool, dict[str, Any]]:
    """Switch the host to each theme of ``themes`` (dark? -> name) in turn, wait for the
    widget to repaint, screenshot it; what the page showed in each."""
    seen = {}
    for dark, name in themes.items():
        switch(name)
        _wears(page, root, dark)
        root.evaluate(NEXT_FRAMES)
        root.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"{shot}-{'dark' if dark else 'light'}.png"))
        seen[dark] = root.evaluate(COLOURS)
    return seen


def _check_colours(seen: dict[bool, dict[str, Any]]) -> None:
    """The widget and its canvas follow the host in both themes."""
    for dark, colours in seen.items():
        assert _dark(colours["host"]) == dark, colours
        assert _dark(colours["widget"]) == dark, colours
        assert _dark(colours["canvas"]) == dark, colours
    assert seen[True]["widget"] != seen[False]["widget"]


def _check_width(seen: dict[bool, dict[str, Any]], width: float) -> None:
    """The canvas keeps its width through the switches (it must never size itself from
    the zero width it reads while the theme's CSS is swapped)."""
    assert [colours["width"] for colours in seen.values()] == [width] * len(seen)


@pytest.fixture
def dump(tmp_path: Path) -> tuple[Path, int, str, int]:
    """The small fixture dump; the payload index of one span to click (a generation
    with attributes), that span's id, and how many samples have reward < 0.5."""
    path = tmp_path / "small.pt"
    shutil.copy(FIXTURES / "small.pt", path)
    frames = load_frames(path)
    target = _payload_index(frames, 0, "sglang_generate")
    span_id = frames.span_core.loc[encode(frames).span_index[target], "span_id"]
    return path, target, span_id, int((frames.samples["reward"] < 0.5).sum())


# ---------------------------------------------------------------- JupyterLab, Notebook 7

@pytest.mark.parametrize("host", ["lab", "notebook7"])
def test_widget_in_jupyter(host: str, request: pytest.FixtureRequest, chromium: Any,
                           dump: tuple[Path, int, str, int]) -> None:
    server: JupyterLab = request.getfixturevalue(host)
    path, target, span_id, low_reward = dump
    url = server.write_notebook(f"frontends-{host}.ipynb", [
        f"from slime_trace_widget import TraceTimeline\ntl = TraceTimeline.from_dump({str(path)!r})"
        "\ntl",
        "print('SELECTED=' + str(tl.selected_span['name']) + '|' + str(tl.selected['span_id']))",
        "tl.show(samples=tl.samples.query('reward < 0.5'))\n"
        "print('ROWS', len(tl.view.sample_rows))",
    ])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        notebook = NotebookPage(page)
        notebook.open(url)
        notebook.set_theme("JupyterLab Light")
        notebook.run_cell(0)
        selector = ".jp-Cell:nth-child(1) .stw-root"
        root = page.locator(f'{selector}[data-ready="1"]')
        root.wait_for(timeout=120_000)
        assert root.get_attribute("data-rows") == "8"

        _click_span(page, selector, target)
        details = root.locator(".stw-details")
        details.get_by_text("prompt_tokens").first.wait_for(timeout=90_000)
        assert "sglang_generate" in details.inner_text()
        notebook.run_cell(1)
        assert f"SELECTED=sglang_generate|{span_id}" in notebook.output_text(1)

        notebook.run_cell(2)
        assert f"ROWS {low_reward}" in notebook.output_text(2)
        page.locator(f'{selector}[data-rows="{low_reward}"]').wait_for(timeout=90_000)

        ARTIFACTS.mkdir(exist_ok=True)
        seen = _theme_round(page, root, notebook.set_theme, JUPYTER_THEMES, f"{host}-theme")
        _check_colours(seen)
    finally:
        page.close()


@pytest.mark.parametrize("host", ["lab", "notebook7"])
def test_jupyter_theme_switch_keeps_the_width(host: str, request: pytest.FixtureRequest,
                                              chromium: Any,
                                              dump: tuple[Path, int, str, int]) -> None:
    server: JupyterLab = request.getfixturevalue(host)
    url = server.write_notebook(f"width-{host}.ipynb", [
        f"from slime_trace_widget import TraceTimeline\n"
        f"TraceTimeline.from_dump({str(dump[0])!r})"])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        notebook = NotebookPage(page)
        notebook.open(url)
        notebook.set_theme("JupyterLab Light")
        notebook.run_cell(0)
        root = page.locator('.jp-Cell:nth-child(1) .stw-root[data-ready="1"]')
        root.wait_for(timeout=120_000)
        width = root.evaluate(COLOURS)["width"]
        ARTIFACTS.mkdir(exist_ok=True)
        seen = _theme_round(page, root, notebook.set_theme, JUPYTER_THEMES, f"{host}-width")
    finally:
        page.close()
    _check_width(seen, width)


@pytest.mark.parametrize("host", ["lab", "notebook7"])
def test_a_cell_waits_for_a_session_that_starts_slowly(host: str,
                                                       request: pytest.FixtureRequest,
                                                       chromium: Any) -> None:
    """On a busy machine the server takes seconds to create the notebook's session, and
    a cell run before it exists is reset, not queued. The session request is held here:
    while it is, the page must not count as connected; once it is let through, the
    cell runs."""
    server: JupyterLab = request.getfixturevalue(host)
    url = server.write_notebook(f"slow-session-{host}.ipynb", ["print('ran' + '!')"])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    held: list[Any] = []

    def hold_session_start(route: Any) -> None:
        if route.request.method == "POST":
            held.append(route)
        else:
            route.continue_()

    try:
        page.route("**/api/sessions*", hold_session_start)
        page.goto(url)
        # The kernel's name can show (from the notebook's metadata) before the session
        # is asked for: wait for the request itself. Playwright hands it to the route
        # handler while this thread is inside one of its calls.
        deadline = time.monotonic() + 90  # a hang guard, not a timing
        while not held and time.monotonic() < deadline:
            page.wait_for_timeout(50)
        assert held, "the page asked for no session"
        page.wait_for_function(
            "() => /Python/.test(document.querySelector('.jp-KernelName')?.textContent"
            " || '')", timeout=90_000)
        assert not page.evaluate(KERNEL_CONNECTED)
        for route in held:
            route.continue_()
        page.wait_for_function(KERNEL_CONNECTED, timeout=90_000)
        notebook = NotebookPage(page)
        notebook.run_cell(0)
        assert "ran!" in notebook.output_text(0)
    finally:
        page.close()


# ---------------------------------------------------------------- marimo

def _marimo_cells(path: Path, reactive: bool) -> list[str]:
    """The notebook: the widget, the selection as Python sees it, a button and the cell
    it runs, which narrows the rows with ``show()``. ``reactive`` wraps the widget in
    ``mo.ui.anywidget`` so a click re-runs the selection cell (run mode has no run
    buttons); otherwise the widget is shown as is and that cell is run by hand."""
    shown = "view = mo.ui.anywidget(tl)\nview" if reactive else "tl"
    return [
        "import marimo as mo\nfrom slime_trace_widget import TraceTimeline\n"
        f"tl = TraceTimeline.from_dump({str(path)!r})\n{shown}",
        ("view.value\n" if reactive else "") + "span = tl.selected_span\n"
        "mo.plain_text('SELECTED=' + ('none' if span is None else "
        "str(span['name']) + '|' + str(tl.selected['span_id'])))",
        "narrow = mo.ui.run_button(label='reward below 0.5')\nnarrow",
        "if narrow.value:\n    tl.show(samples=tl.samples.query('reward < 0.5'))\n"
        "mo.plain_text(f'ROWS {len(tl.view.sample_rows)}')",
    ]


def _marimo_round(notebook: MarimoPage, target: int, span_id: str, low_reward: int,
                  run_by_hand: bool) -> Any:
    """Render, click, details, selection read back, ``show()``; the widget's root."""
    page = notebook.page
    if run_by_hand:
        notebook.run_cell(0)
    selector = f"#{notebook.output(0).get_attribute('id')} .stw-root"
    root = page.locator(f'{selector}[data-ready="1"]')
    root.wait_for(timeout=120_000)
    assert root.get_attribute("data-rows") == "8"

    _click_span(page, selector, target)
    details = root.locator(".stw-details")
    details.get_by_text("prompt_tokens").first.wait_for(timeout=90_000)
    assert "sglang_generate" in details.inner_text()
    if run_by_hand:
        notebook.run_cell(1)
    notebook.wait_for_output(1, f"SELECTED=sglang_generate|{span_id}")

    if run_by_hand:
        notebook.run_cell(2)
        notebook.run_cell(3)
    notebook.wait_for_output(3, "ROWS 8")
    notebook.output(2).get_by_role("button").click()
    notebook.wait_for_output(3, f"ROWS {low_reward}")
    page.locator(f'{selector}[data-rows="{low_reward}"]').wait_for(timeout=90_000)
    return root


def test_widget_in_marimo_edit(marimo_edit: Marimo, chromium: Any,
                               dump: tuple[Path, int, str, int]) -> None:
    path, target, span_id, low_reward = dump
    url = marimo_edit.write_notebook("frontends_edit.py", _marimo_cells(path, reactive=False))
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        notebook = MarimoPage(page)
        notebook.open(url)
        _marimo_round(notebook, target, span_id, low_reward, run_by_hand=True)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "marimo-edit-timeline.png"))
    finally:
        page.close()


def test_widget_in_marimo_run(marimo_run: Callable[[str, list[str]], str], chromium: Any,
                              dump: tuple[Path, int, str, int]) -> None:
    path, target, span_id, low_reward = dump
    url = marimo_run("frontends_run.py", _marimo_cells(path, reactive=True))
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        notebook = MarimoPage(page)
        notebook.open(url)
        _marimo_round(notebook, target, span_id, low_reward, run_by_hand=False)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "marimo-run-timeline.png"))
    finally:
        page.close()


def test_widget_follows_the_marimo_theme(marimo_edit: Marimo, chromium: Any,
                                         dump: tuple[Path, int, str, int]) -> None:
    """marimo marks its theme with ``.dark``/``data-theme`` on ancestors, not with the
    OS colour scheme: a dark notebook on a light OS (Chromium's default) and back."""
    path = dump[0]
    url = marimo_edit.write_notebook("frontends_theme.py",
                                     _marimo_cells(path, reactive=False)[:1])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1,
                             color_scheme="light")
    try:
        notebook = MarimoPage(page)
        notebook.open(url)
        notebook.set_theme("light")
        notebook.run_cell(0)
        output = notebook.output(0)
        root = page.locator(f"#{output.get_attribute('id')} .stw-root[data-ready=\"1\"]")
        try:
            root.wait_for(timeout=120_000)
        except PlaywrightTimeout:  # failed once under load: keep what the page showed
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "marimo-theme-not-ready.png"))
            (ARTIFACTS / "marimo-theme-not-ready.html").write_text(output.inner_html())
            raise
        ARTIFACTS.mkdir(exist_ok=True)
        width = root.evaluate(COLOURS)["width"]
        seen = _theme_round(page, root, notebook.set_theme, {True: "dark", False: "light"},
                            "marimo-theme")
    finally:
        page.close()
    _check_colours(seen)
    _check_width(seen, width)
