"""Samples' fates and the rollouts' ledger in Chromium: the widget in JupyterLab, the
snapshot from file:// and the CLI's page offer "Colour: by fate", which tints each row
with its sample's fate and lists the six fates with their counts in a legend group of
their own; above the rows, one ledger bar per rollout whose parts are
``signal_ledger``'s seconds per fate; on the time axis, a marker at ``tail_price``'s
90%-finished instant labelled "90% finished at X s"."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slime_trace_widget import TraceTimeline
from slime_trace_widget.answers.ledger import FATES, sample_fates, signal_ledger
from slime_trace_widget.answers.tail import tail_price
from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.frames.model import TraceFrames
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.payload import encode
from tests.browser.notebooks import FIRST_WIDGET, run_first_widget
from tests.browser.test_engine_browser import _center, _debug, _pixels, _wait
from tests.browser.test_snapshot_browser import opened
from tests.support.browser import VIEWPORT, JupyterLab
from tests.view.test_payload import decode

pytestmark = pytest.mark.browser

ROOT = Path(__file__).parents[2]
FIXTURES = Path(__file__).parents[1] / "fixtures"
#: js/src/render/colors.js FATE_COLORS, and the marker's colour on a light theme
#: (js/src/render/finish_marker.js).
FATE_RGB = {"signal": (0x2E, 0x9D, 0x58), "no_signal": (0x8D, 0x99, 0xAB),
            "filtered": (0x87, 0x63, 0xC8), "truncated": (0xE0, 0x91, 0x2F),
            "aborted": (0xA8, 0x64, 0x3B), "failed": (0xD0, 0x54, 0x5A)}
MARKER_RGB = (0x0B, 0x7F, 0x82)
LABELS = {"signal": "signal", "no_signal": "no signal", "filtered": "filtered",
          "truncated": "truncated", "aborted": "aborted", "failed": "failed"}


class Expected:
    """What the answers say about a payload of ``frames``: each payload sample's fate,
    the fate counts, per dump its ledger row and where its 90%-finished instant is drawn
    (payload seconds) with ``finished_90``."""

    def __init__(self, frames: TraceFrames, align: str = "global") -> None:
        view = encode(frames, align=align)
        cols = decode(view.payload)
        self.t0 = view.payload["meta"]["t0"]
        self.cols = cols
        fates = sample_fates(frames).loc[view.sample_rows]
        self.fates = [str(fate) for fate in fates]
        self.counts = {fate: self.fates.count(fate) for fate in FATES}
        ledger, price = signal_ledger(frames), tail_price(frames)
        self.dumps: list[dict[str, Any]] = []
        for dump, rollout_id in enumerate(frames.rollout_ids):
            row, mine = ledger.loc[rollout_id], cols["smp_rollout"] == dump
            start = frames.samples.loc[frames.samples["dump"] == dump, "start"].min()
            offset = float(cols["smp_offset"][mine][0])
            finished = float(price.loc[rollout_id, "finished_90"])
            self.dumps.append({
                "seconds": {fate: float(row[f"seconds_{fate}"]) for fate in FATES},
                "samples": {fate: int(row[f"samples_{fate}"]) for fate in FATES},
                "finished_90": finished,
                "time": float(start) - self.t0 - offset + finished,
            })

    def span_pair(self) -> tuple[int, int]:
        """Two spans of row 0's sample (the earliest start) whose starts lie well apart."""
        starts = self.cols["span_start"]
        first = int(np.argmin(np.where(np.isfinite(starts), starts, np.inf)))
        sample = self.cols["span_sample"][first]
        mine = np.flatnonzero(self.cols["span_sample"] == sample)
        second = int(mine[np.argmax(starts[mine])])
        assert starts[second] - starts[first] > 0.5
        return first, second


def _rgb(css: str) -> tuple[int, int, int]:
    """``#rrggbb`` as a tuple."""
    return int(css[1:3], 16), int(css[3:5], 16), int(css[5:7], 16)


def _legend_fates(root: Any) -> dict[str, int]:
    """The fate legend group's chips: fate -> count as shown."""
    chips = root.evaluate("""(el) => Array.from(
        el.querySelectorAll('.stw-legend-fates .stw-fate-key'),
        (chip) => [chip.dataset.fate, chip.querySelector('.stw-legend-text').textContent,
                   chip.querySelector('.stw-fate-count').textContent])""")
    for fate, text, _ in chips:
        assert text == LABELS[fate]
    return {fate: int(count.replace(",", "")) for fate, _, count in chips}


def _x_of(root: Any, expected: Expected) -> Any:
    """Client x of a payload time, from two spans' rectangles (independent of the marker code)."""
    first, second = expected.span_pair()
    _debug(root, "debug.scrollToRow(0)")
    _wait(root.page, root, "!!debug.spanRect(arg[0]) && !!debug.spanRect(arg[1])", [first, second])
    a, b = (_debug(root, "debug.spanRect(arg)", index) for index in (first, second))
    ta, tb = (float(expected.cols["span_start"][index]) for index in (first, second))
    scale = (b["x"] - a["x"]) / (tb - ta)
    return lambda time: a["x"] + (time - ta) * scale


def _check_colouring(page: Any, root: Any, expected: Expected, already: bool) -> None:
    """Switch "Colour" to "by fate" (unless the view opened so); the legend lists the six
    fates with their counts; row 0's strip takes its fate's colour and its background,
    right of where its sample's bars end, the fate tint."""
    control = root.locator(".stw-field-color select")
    assert control.is_visible()
    _debug(root, "debug.scrollToRow(0)")
    _center(root)
    canvas = root.locator("canvas.stw-canvas").bounding_box()
    row_sample = next(s for s in range(len(expected.fates))
                      if _debug(root, "debug.rowOfSample(arg)", s) == 0)
    fate = expected.fates[row_sample]
    first, _ = expected.span_pair()
    bar = _debug(root, "debug.spanRect(arg)", first)
    strip = {"x": canvas["x"] + 1, "y": bar["y"] + 2, "w": 3, "h": max(1.0, bar["h"] - 4)}
    x_of = _x_of(root, expected)
    plot = _debug(root, "debug.fates().bars[0].rect")  # the bars line up with the plot
    left = x_of(float(expected.cols["smp_end"][row_sample])) + 6
    right = plot["x"] + plot["w"] - 2
    assert right - left > 8, (left, right)
    background = {"x": left, "y": bar["y"] + 2, "w": right - left, "h": max(1.0, bar["h"] - 4)}
    if already:
        assert control.input_value() == "fate"
    else:
        assert control.input_value() == "span"
        assert not root.locator(".stw-legend-fates").count()
        assert FATE_RGB[fate] not in set(_pixels(page, strip))
        assert _debug(root, "debug.rowFill(0).strip") is None
        plain = Counter(_pixels(page, background)).most_common(1)[0][0]
        control.select_option("fate")
    _wait(page, root, "debug.fates().on && debug.rowFill(0).strip === arg",
          "#{:02x}{:02x}{:02x}".format(*FATE_RGB[fate]))
    root.locator(".stw-legend-fates").wait_for()
    assert _legend_fates(root) == expected.counts
    assert _debug(root, "debug.fates().counts") == expected.counts
    frames = _debug(root, "debug.frameCount")
    _debug(root, "debug.repaint()")
    _wait(page, root, "debug.frameCount > arg", frames)
    assert Counter(_pixels(page, strip)).most_common(1)[0][0] == FATE_RGB[fate]
    tint = _rgb(_debug(root, "debug.rowFill(0).fill"))
    assert Counter(_pixels(page, background)).most_common(1)[0][0] == tint
    if not already:
        assert tint != plain


def _check_ledger(page: Any, root: Any, expected: Expected) -> None:
    """One bar per rollout; its parts are the fates with seconds, in FATES order, each as
    wide as its seconds, labelled with its share; hovering one gives seconds and counts."""
    bars = _debug(root, "debug.fates().bars")
    assert [bar["rollout"] for bar in bars] == list(range(len(expected.dumps)))
    for bar, want in zip(bars, expected.dumps, strict=True):
        assert bar["samples"] == want["samples"]
        assert bar["seconds"] == pytest.approx(want["seconds"], abs=1e-6)
        total = sum(want["seconds"].values())
        timed = [fate for fate in FATES if want["seconds"][fate] > 0]
        assert [seg["fate"] for seg in bar["segments"]] == timed
        width = bar["rect"]["w"]
        for seg in bar["segments"]:
            share = want["seconds"][seg["fate"]] / total
            assert seg["rect"]["w"] == pytest.approx(share * width, abs=1.5), seg
            label, number = re.fullmatch(r"(.+) ([\d.]+)%", seg["text"]).groups()
            assert label == LABELS[seg["fate"]]
            assert float(number) == pytest.approx(share * 100, abs=0.51 if share >= 0.1 else 0.051)
    widest = max(bars[0]["segments"], key=lambda seg: seg["rect"]["w"])
    root.locator(".stw-ledger").scroll_into_view_if_needed()
    box = _debug(root, "debug.fates().bars[0].segments.find((s) => s.fate === arg).rect",
                 widest["fate"])
    page.mouse.move(box["x"] + box["w"] / 2, box["y"] + box["h"] / 2)
    tooltip = root.locator(".stw-tooltip")
    tooltip.wait_for(state="visible")
    text = tooltip.inner_text()
    want = expected.dumps[0]
    count = want["samples"][widest["fate"]]
    assert f"{count} of {sum(want['samples'].values())}" in text, text
    assert LABELS[widest["fate"]] in text
    seconds = float(re.search(r"([\d,.]+) s of", text).group(1).replace(",", ""))
    assert seconds == pytest.approx(want["seconds"][widest["fate"]], rel=0.01, abs=0.01)
    page.mouse.move(5, 5)


def _check_markers(page: Any, root: Any, expected: Expected) -> None:
    """A marker per rollout at tail_price's instant, solid on the axis, whose label
    (shown, or the flag's tooltip) reads "90% finished at X s"."""
    x_of = _x_of(root, expected)
    markers = _debug(root, "debug.fates().markers")
    assert [m["rollout"] for m in markers] == sorted(
        range(len(expected.dumps)), key=lambda k: expected.dumps[k]["time"])
    canvas = root.locator("canvas.stw-canvas").bounding_box()
    for marker in markers:
        want = expected.dumps[marker["rollout"]]
        assert marker["time"] == pytest.approx(want["time"], abs=2e-3)
        assert marker["x"] == pytest.approx(x_of(want["time"]), abs=1.5)
        seconds = float(re.search(r"90% finished at ([\d,.]+) s$", marker["text"]).group(1)
                        .replace(",", ""))
        assert seconds == pytest.approx(want["finished_90"], rel=0.005, abs=0.006)
        flag = _pixels(page, {"x": marker["x"] - 1, "y": canvas["y"] + 4, "w": 2, "h": 6})
        assert MARKER_RGB in flag, Counter(flag).most_common(3)
    first = markers[0]
    page.mouse.move(first["x"], first["y"])
    page.wait_for_function("([canvas, text]) => canvas.title === text",
                           arg=[root.locator("canvas.stw-canvas").element_handle(),
                                first["text"]])
    page.mouse.move(5, 5)


def _check_details(page: Any, root: Any, expected: Expected) -> None:
    """The details panel of a span names its sample's fate."""
    first, _ = expected.span_pair()
    _debug(root, "debug.scrollToRow(0)")
    _center(root)
    rect = _debug(root, "debug.spanRect(arg)", first)
    page.mouse.click(rect["x"] + min(rect["w"] / 2, 10), rect["y"] + rect["h"] / 2)
    details = root.locator(".stw-details")
    details.get_by_text("fate", exact=True).wait_for()
    fate = expected.fates[int(expected.cols["span_sample"][first])]
    assert re.search(rf"\bfate\s+{LABELS[fate]}\b", details.inner_text()), details.inner_text()
    page.keyboard.press("Escape")


def _check(page: Any, root_selector: str, expected: Expected, already: bool = False) -> None:
    root = page.locator(root_selector)
    _check_colouring(page, root, expected, already)
    _check_ledger(page, root, expected)
    _center(root)
    _check_markers(page, root, expected)
    _check_details(page, root, expected)


# --------------------------------------------------------------------------- tests


def test_widget_colours_rows_by_fate_with_ledger_and_marker(lab: JupyterLab, chromium: Any
                                                            ) -> None:
    """small.pt (statuses completed 6, truncated 2) in JupyterLab; the choice reaches
    Python's ``view_state``."""
    frames = load_frames(FIXTURES / "small.pt")
    expected = Expected(frames)
    assert expected.counts == {"signal": 6, "no_signal": 0, "filtered": 0, "truncated": 2,
                               "aborted": 0, "failed": 0}
    url = lab.write_notebook("fates.ipynb", [
        "from slime_trace_widget import TraceTimeline\n"
        f"tl = TraceTimeline.from_dump({str(FIXTURES / 'small.pt')!r})\ntl",
        "print('colour', tl.view_state.get('color_by'))",
    ])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        notebook = run_first_widget(page, url)
        _check(page, FIRST_WIDGET, expected)
        # view_state reaches the kernel ~250 ms after the change: ask until it has
        for _ in range(20):
            notebook.run_cell(1)
            if "colour fate" in notebook.output_text(1):
                break
        assert "colour fate" in notebook.output_text(1)
    finally:
        page.close()


def test_snapshot_opens_coloured_by_fate_with_ledger_and_marker(chromium: Any,
                                                                tmp_path: Path) -> None:
    """A demo rollout of five fates (all but filtered), saved coloured by fate, opened
    from file://."""
    dump = write_demo_dump(tmp_path / "rollout_2.pt", n_samples=24, seed=14, rollout_id=2)
    frames = load_frames(str(dump), progress=False)
    expected = Expected(frames)
    assert sum(1 for count in expected.counts.values() if count) >= 4
    timeline = TraceTimeline(frames)
    timeline.view_state = {**timeline.view_state, "color_by": "fate"}
    path = Path(timeline.to_html(tmp_path / "fates.html"))
    with opened(chromium, path) as page:
        _check(page, ".stw-root", expected, already=True)


def test_cli_page_shows_a_bar_and_a_marker_per_rollout(chromium: Any, tmp_path: Path) -> None:
    """The page ``slime-trace-viewer`` writes for two dumps: a ledger bar and a 90% marker
    for each rollout."""
    dumps = [write_demo_dump(tmp_path / f"rollout_{k}.pt", n_samples=24, seed=k, rollout_id=k)
             for k in (1, 2)]
    frames = load_frames([str(dump) for dump in dumps], progress=False)
    expected = Expected(frames)
    out = tmp_path / "page"
    subprocess.run([sys.executable, "-m", "slime_trace_widget", *map(str, dumps), "--no-serve",
                    "--out-dir", str(out)], check=True, capture_output=True, text=True,
                   timeout=600, cwd=ROOT)
    with opened(chromium, next(out.glob("*.html"))) as page:
        assert page.locator(".stw-ledger-row").count() == 2
        _check(page, ".stw-root", expected)
