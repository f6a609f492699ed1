"""The details panel's engine phases in Chromium are Python's: a snapshot of samples whose
engine traces went through the join (a PD request whose halves overlap, with Mooncake KV
senders on two prefill ranks; a request retracted and run again), each generation
clicked, shows per phase the milliseconds ``analysis.engine_breakdown`` gives its sample:
a partition of wall time, the sender counting none of its own. And the fixture the JS
unit tests check the same rule against (``js/test/fixtures/engine_phases.json``) is what
``js/dev/engine_phase_cases.py`` writes from the Python of now."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from slime_trace_widget import TraceTimeline
from slime_trace_widget.analysis import engine_breakdown
from slime_trace_widget.answers.engine import PHASE_COLUMNS
from slime_trace_widget.view.payload import encode
from tests.browser.test_snapshot_browser import opened
from tests.support.engine_phase_frames import pd_and_retract_frames
from tests.view.test_payload import decode

ROOT = Path(__file__).parents[2]
CASES_SCRIPT = ROOT / "js" / "dev" / "engine_phase_cases.py"
#: How long a condition may take to hold in the page.
WAIT_MS = 30_000
#: The panel shows whole milliseconds from 100 ms (js/src/util/format.js formatMs).
MS_TOLERANCE = 0.6


def _debug(page: Any, script: str, arg: Any = None) -> Any:
    return page.locator(".stw-root").evaluate(
        f"(el, arg) => ((debug, arg) => {script})(el.stwDebug, arg)", arg)


def _wait_for_phases(page: Any, expected: dict[str, float]) -> None:
    """Wait until the details panel's engine phases are ``expected`` (ms, each within
    MS_TOLERANCE, no other phase shown)."""
    read = """() => Object.fromEntries(Array.from(
        document.querySelectorAll('.stw-details .stw-engine-phases tbody tr'),
        (row) => [row.cells[0].textContent, Number(row.cells[1].textContent.replace(/,/g, ''))]))"""
    try:
        page.wait_for_function(
            f"""([expected, tolerance]) => {{
              const shown = ({read})();
              const phases = Object.keys(shown);
              const near = (phase) => Math.abs(shown[phase] - expected[phase]) <= tolerance;
              return phases.length === Object.keys(expected).length
                && phases.every((phase) => phase in expected && near(phase));
            }}""", arg=[expected, MS_TOLERANCE], timeout=WAIT_MS)
    except Exception as error:  # playwright's TimeoutError: say what the panel shows
        raise AssertionError(f"the panel shows {page.evaluate(read)} ms, "
                             f"engine_breakdown gives {expected} ms") from error


@pytest.mark.browser
def test_the_panel_shows_engine_breakdown_s_phases(chromium: Any, tmp_path: Path) -> None:
    frames = pd_and_retract_frames(0x61)
    breakdown = engine_breakdown(frames)
    view = encode(frames)
    columns = decode(view.payload)
    names = view.payload["meta"]["names"]
    generations = [position for position, index in enumerate(view.span_index)
                   if str(frames.span_core.at[index, "name"]) == "sglang_generate"]
    assert len(generations) == 2
    page_path = Path(TraceTimeline(frames).to_html(tmp_path / "engine_phases.html"))
    assert "sglang kv sender" in names
    with opened(chromium, page_path) as page:
        for position in generations:
            row = int(frames.span_core.at[int(view.span_index[position]), "sample_row"])
            seconds = breakdown.loc[row, PHASE_COLUMNS]
            expected = {column.removesuffix("_s"): float(value) * 1e3
                        for column, value in seconds.items() if value > 0}
            # a partition: never more than the generation's 10 s, the sender adding none
            assert sum(expected.values()) <= 10_000 + 1e-6
            _debug(page, "debug.scrollToRow(debug.rowOfSample(arg))",
                   int(columns["span_sample"][position]))
            page.wait_for_function(
                "([index]) => !!document.querySelector('.stw-root').stwDebug.spanRect(index)",
                arg=[position], timeout=WAIT_MS)
            rect = _debug(page, "debug.spanRect(arg)", position)
            page.mouse.click(rect["x"] + min(rect["w"] / 2, 40), rect["y"] + rect["h"] / 2)
            _wait_for_phases(page, expected)


def test_the_js_fixture_is_what_python_gives_now() -> None:
    """js/test/fixtures/engine_phases.json (Python's names and figures the JS rule is
    checked against) is current: rerun js/dev/engine_phase_cases.py when this fails."""
    spec = importlib.util.spec_from_file_location("engine_phase_cases", CASES_SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = json.loads(module.OUT.read_text(encoding="utf-8"))
    assert written == module.fixture(), (
        "stale: PYTHONPATH=. python js/dev/engine_phase_cases.py")
