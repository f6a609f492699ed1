"""``TraceTimeline.live(DIR)`` in JupyterLab, fed by a real receiver subprocess that the
live stream (``tracing.live.install``) sends to: a span recorded on a real clock grows
while open and then closes, a hung sample is flagged stalled, and ``stop_following()``
stops the clock."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget.tracing import live
from slime_trace_widget.tracing.spans import trace_span
from tests.browser.live_stream import live_state
from tests.browser.notebooks import FIRST_WIDGET, run_first_widget
from tests.support.browser import VIEWPORT, JupyterLab
from tests.support.receiver import start_receiver

WAIT_MS = 60_000
LIVE = live_state(FIRST_WIDGET)
#: Kernel code: ``readers()``, the follow threads reading now.
READERS = ("import pathlib, threading, time\n"
           "def readers():\n"
           "    return sum(t.name == 'slime-trace-follow' for t in threading.enumerate())\n")


@contextmanager
def _notebook_open(chromium: Any, url: str) -> Iterator[tuple[Any, Any]]:
    """The page and notebook at ``url``, its first cell run and its widget drawn; the
    page is closed when the block ends."""
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        yield page, run_first_widget(page, url)
    finally:
        page.close()


def _spans(page: Any, name: str) -> list[dict]:
    return [s for s in page.evaluate(f"{LIVE}.spans") if s["name"] == name]


def test_live_widget_grows_closes_flags_and_stops(chromium: Any, lab: JupyterLab,
                                                  tmp_path: Path) -> None:
    folder = tmp_path / "collect"
    with start_receiver(folder) as receiver, \
            live.install(f"http://127.0.0.1:{receiver.http_port}") as stream:
        assert stream.enabled, stream
        url = lab.write_notebook("live_widget.ipynb", [
            "from slime_trace_widget import TraceTimeline\n"
            f"tl = TraceTimeline.live({str(folder)!r}, stall_after=2)\ntl",
            "tl.stop_following()",
        ])
        with _notebook_open(chromium, url) as (page, notebook):
            running = {"index": 0, "group_index": 0}
            generate = trace_span(running, "generate")
            generate.__enter__()
            page.wait_for_function(f"() => {LIVE}.growing.length === 1", timeout=WAIT_MS)
            first = _spans(page, "generate")[0]
            page.wait_for_function(f"() => {LIVE}.growing[0].end > {first['end']} + 0.5",
                                   timeout=WAIT_MS)
            generate.__exit__(None, None, None)
            page.wait_for_function(f"() => {LIVE}.growing.length === 0", timeout=WAIT_MS)
            closed = _spans(page, "generate")[0]
            recorded = running["trace"]["events"]
            assert not closed["open"]
            assert closed["end"] - closed["start"] == pytest.approx(
                recorded[-1]["ts"] - recorded[0]["ts"], abs=1e-3)

            hung = {"index": 1, "group_index": 0}
            # never returns; entered in a copy of this context, so the open span is not
            # left active for the tests that run after this one in the process
            contextvars.copy_context().run(trace_span(hung, "tool_call").__enter__)
            page.wait_for_function(f"() => {LIVE}.stalled.length === 1", timeout=WAIT_MS)
            assert any(tag["text"].endswith("in tool_call")
                       for tag in page.evaluate(f"{LIVE}.tags"))

            notebook.run_cell(1)
            page.wait_for_function(f"() => {LIVE}.following === false", timeout=WAIT_MS)
            page.wait_for_function(f"() => {LIVE}.banner.startsWith('live (stopped)')",
                                   timeout=WAIT_MS)


def test_a_live_widget_of_a_cell_run_again_stops_reading(chromium: Any, lab: JupyterLab,
                                                          tmp_path: Path) -> None:
    """Running the cell again removes the first widget's view (ipywidgets keeps the widget
    itself): its view says so, and the first widget stops reading the store, so one
    thread reads it, not two."""
    folder = tmp_path / "collect"
    folder.mkdir()
    url = _watched_live_notebook(lab, "live_rerun.ipynb", folder, "", (
        "deadline = time.monotonic() + 60\n"
        "while readers() > 1 and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "print('reading threads:', readers())"))
    with _notebook_open(chromium, url) as (page, notebook):
        notebook.run_cell(0)
        page.wait_for_selector(f'{FIRST_WIDGET}[data-ready="1"]', timeout=WAIT_MS)
        notebook.run_cell(1)
        assert "reading threads: 1" in _printed(page, notebook, "reading threads:")


def test_a_live_widget_whose_page_is_gone_stops_reading(chromium: Any, lab: JupyterLab,
                                                         tmp_path: Path) -> None:
    """A page left (or reloaded, or closed) removes its views without a word: the view
    stops saying ``view_alive``, and the widget, still in the kernel, stops reading the
    store once it has missed a few. The kernel writes what it saw into files, since the
    page that could show it is gone."""
    folder, heard, gone, verdict = (tmp_path / name for name in
                                    ("collect", "heard", "gone", "verdict"))
    folder.mkdir()
    url = lab.write_notebook("live_gone.ipynb", [
        READERS + "from slime_trace_widget import TraceTimeline\n"
        f"tl = TraceTimeline.live({str(folder)!r})\n"
        "tl.view_alive_seconds = 0.2\n"
        "def note(_widget, content, _buffers):\n"
        "    if content.get('type') == 'view_alive':\n"
        f"        with open({str(heard)!r}, 'a') as out:\n"
        "            out.write('alive\\n')\n"
        "tl.on_msg(note)\n"
        "def watch():\n"
        f"    while not pathlib.Path({str(gone)!r}).exists():\n"
        "        time.sleep(0.05)\n"
        "    deadline = time.monotonic() + 120\n"
        "    while readers() and time.monotonic() < deadline:\n"
        "        time.sleep(0.05)\n"
        f"    pathlib.Path({str(verdict)!r}).write_text(f'reading threads: {{readers()}}')\n"
        "threading.Thread(target=watch, daemon=True).start()\n"
        "tl",
    ])
    with _notebook_open(chromium, url) as (page, _):
        _wait_for_file(lambda: heard.exists() and heard.read_text().count("alive") >= 3)
        page.goto("about:blank")  # the notebook's page is gone; no view_closed was sent
        gone.touch()
        _wait_for_file(verdict.exists, seconds=240)
        assert verdict.read_text() == "reading threads: 0"


def test_a_live_widget_reads_on_while_a_long_cell_runs(chromium: Any, lab: JupyterLab,
                                                       tmp_path: Path) -> None:
    """A kernel takes the views' messages only between cells: a cell running longer than
    a view may be silent must not make the widget stop reading (silence is timed on
    the kernel's idle clock). The cell itself watches the reading threads."""
    folder = tmp_path / "collect"
    folder.mkdir()
    url = _watched_live_notebook(
        lab, "live_long_cell.ipynb", folder,
        "tl.view_alive_seconds = 1.0  # gone after 5 s of silence\n", (
            "seen, started = set(), time.monotonic()\n"
            "while time.monotonic() - started < 12:\n"
            "    seen.add(readers())\n"
            "    time.sleep(0.05)\n"
            "print('reading threads during the cell:', sorted(seen))"))
    with _notebook_open(chromium, url) as (page, notebook):
        notebook.run_cell(1)
        assert "reading threads during the cell: [1]" in _printed(
            page, notebook, "reading threads during the cell:")


def _watched_live_notebook(lab: JupyterLab, name: str, folder: Path, setup: str,
                           watch: str) -> str:
    """A notebook whose first cell shows ``TraceTimeline.live(folder)`` (after ``setup``
    lines) and whose second runs ``watch`` with ``readers()`` defined."""
    return lab.write_notebook(name, [
        "from slime_trace_widget import TraceTimeline\n"
        f"tl = TraceTimeline.live({str(folder)!r})\n" + setup + "tl",
        READERS + watch,
    ])


def _printed(page: Any, notebook: Any, text: str) -> str:
    """The second cell's output, once it holds ``text``."""
    page.wait_for_function(
        "(text) => document.querySelectorAll('.jp-Cell')[1].querySelector('.jp-OutputArea')"
        "?.textContent.includes(text)", arg=text, timeout=WAIT_MS * 2)
    return notebook.output_text(1)


def _wait_for_file(condition: Any, seconds: float = 120.0) -> None:
    """Wait (a hang guard of ``seconds``) until ``condition()`` holds."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the kernel did not write in time"
        time.sleep(0.05)
