"""Engine traces in Chromium: the widget in JupyterLab and the snapshot from file:// draw
the engine's lanes under a generation with labels naming what each lane holds, keep a
collapsed row the sample's own steps (the engine's phases a band under them), list the
engine's names in a legend group of their own, show a generation's engine phases and the
engine's figures beside slime's in the details panel, and the engines' load as counter
tracks above the rows that the cursor reads, summed or per engine."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slime_trace_widget.demo import write_demo_dump
from slime_trace_widget.sources.loading import load_frames
from slime_trace_widget.view.contract import FLAG_ENGINE
from slime_trace_widget.view.payload import encode
from tests.browser.engine_scene import LOAD_STEP, scene
from tests.browser.notebooks import FIRST_WIDGET, run_first_widget
from tests.browser.test_snapshot_browser import opened
from tests.sources.test_engine_join import SKEWS, store_requests
from tests.support.browser import VIEWPORT, JupyterLab
from tests.support.engine_traces import requests_for
from tests.view.test_payload import decode

pytestmark = pytest.mark.browser

LEGEND_GROUP = "engine (SGLang's own trace of each request)"
ROOT = Path(__file__).parents[2]
#: The engine band's decode colour (js/src/render/colors.js ENGINE_PHASE_COLORS).
BAND_DECODE = (0x3C, 0x9E, 0x57)
#: How long a condition may take to hold in the page (the frame loop, a kernel reply).
WAIT_MS = 30_000


class Shown:
    """What the test knows of a payload: its columns and names, a generation span with
    engine requests in the expanded row (``generation``, its ``sample``), the decode
    request's decode slice, and a generation in a collapsed row (``collapsed``)."""

    def __init__(self, frames: Any, generation_index: int, decode_index: int) -> None:
        view = encode(frames)
        self.cols = decode(view.payload)
        self.names = view.payload["meta"]["names"]
        order = {int(index): k for k, index in enumerate(view.span_index)}
        self.generation = order[generation_index]
        self.decode_slice = order[decode_index]
        self.sample = int(self.cols["span_sample"][self.generation])
        self.row = int(view.sample_rows[self.sample])
        engine = (self.cols["span_flags"] & FLAG_ENGINE) > 0
        parents = self.cols["span_parent"]
        owners = set(parents[engine & (parents >= 0)].tolist())
        self.collapsed = next(
            int(i) for i in np.flatnonzero(self.cols["span_sample"] != self.sample)
            if int(i) in owners and not engine[i] and self.name(int(i)) == "sglang_generate")

    def name(self, span: int) -> str:
        return self.names[self.cols["span_name"][span]]

    def lane_names(self, lane: int) -> Counter[str]:
        """The names of the spans in lane ``lane`` of the expanded sample, with counts."""
        mine = (self.cols["span_sample"] == self.sample) & (self.cols["span_lane"] == lane)
        return Counter(self.name(int(i)) for i in np.flatnonzero(mine))


def _debug(root: Any, script: str, arg: Any = None) -> Any:
    """Evaluate ``script`` as ``(debug, arg) => ...`` against the root's ``stwDebug``."""
    return root.evaluate(f"(el, arg) => ((debug, arg) => {script})(el.stwDebug, arg)", arg)


def _wait(page: Any, root: Any, script: str, arg: Any = None) -> None:
    """Wait until ``script`` (as in :func:`_debug`) is true."""
    page.wait_for_function(
        f"([el, arg]) => ((debug, arg) => {script})(el.stwDebug, arg)",
        arg=[root.element_handle(), arg], timeout=WAIT_MS)


def _center(root: Any) -> None:
    """Scroll the page (a notebook) so that the whole timeline canvas is in view."""
    root.locator("canvas.stw-canvas").evaluate(
        "(canvas) => canvas.scrollIntoView({block: 'center'})")


def _legend(root: Any) -> dict[str, dict[str, tuple[int, int, int]]]:
    """The legend's colours: per group title ("" for the sample's own spans), each
    item's text and its swatch's colour."""
    groups = root.evaluate("""(el) => Array.from(el.querySelectorAll('.stw-legend-group'),
        (group) => [group.querySelector('.stw-legend-title')?.textContent ?? '',
                    Array.from(group.querySelectorAll('.stw-legend-item'), (item) => [
                      item.querySelector('.stw-legend-text').textContent,
                      getComputedStyle(item.firstElementChild).backgroundColor])])""")

    def rgb(css: str) -> tuple[int, int, int]:
        red, green, blue = (int(part) for part in css[css.index("(") + 1:-1].split(",")[:3])
        return red, green, blue

    out: dict[str, dict[str, tuple[int, int, int]]] = {}
    for title, items in groups:
        out.setdefault(title, {}).update((text, rgb(css)) for text, css in items)
    return out


def _pixels(page: Any, rect: dict[str, float]) -> list[tuple[int, int, int]]:
    from PIL import Image

    clip = {"x": rect["x"], "y": rect["y"], "width": max(1.0, rect["w"]),
            "height": max(1.0, rect["h"])}
    with Image.open(io.BytesIO(page.screenshot(clip=clip))) as image:
        raw = image.convert("RGB").tobytes()
    return [(raw[k], raw[k + 1], raw[k + 2]) for k in range(0, len(raw), 3)]


def _check_lanes(root: Any, shown: Shown) -> None:
    """Each lane of the expanded row is labelled with the names of the spans it holds
    (its most frequent first), the engine's lanes with their server's role."""
    labels = _debug(root, "debug.laneLabels(arg)", shown.sample)
    assert len(labels) >= 6
    for lane, label in enumerate(labels):
        names = shown.lane_names(lane)
        listed = label["names"].split(" +")[0].split(", ")
        assert set(listed) <= set(names), (lane, label, names)
        assert names.most_common(1)[0][0] in listed, (lane, label)
    decode_lane = labels[int(shown.cols["span_lane"][shown.decode_slice])]
    assert "decode_loop" in decode_lane["names"] and decode_lane["role"] == "[D]", decode_lane
    assert decode_lane["text"].endswith(" [D]")
    assert "sglang_generate" in labels[int(shown.cols["span_lane"][shown.generation])]["names"]
    assert any(label["role"] == "[P]" and "prefill_forward" in label["names"]
               for label in labels)


def _check_collapsed(page: Any, root: Any, shown: Shown) -> None:
    """A collapsed row's pixels where a generation with engine slices is drawn are the
    generation's colour, not a slice's; the engine's decode shows in the band under it."""
    span = shown.collapsed
    start, end = float(shown.cols["span_start"][span]), float(shown.cols["span_end"][span])
    pad = (end - start) * 0.05
    _debug(root, "debug.setView(arg[0], arg[1])", [start - pad, end + pad])
    sample = int(shown.cols["span_sample"][span])
    _debug(root, "debug.scrollToRow(debug.rowOfSample(arg))", sample)
    _wait(page, root, "(debug.spanRect(arg) || {w: 0}).w > 300", span)
    _center(root)
    rect = _debug(root, "debug.spanRect(arg)", span)
    legend = _legend(root)
    generation = legend[""]["sglang_generate"]
    # the engine's colours that nothing of the sample's own has (its events, its PD band)
    own = {colour for title, items in legend.items() if title != LEGEND_GROUP
           for colour in items.values()}
    slices = set(legend[LEGEND_GROUP].values()) - own
    assert slices, legend[LEGEND_GROUP]
    pixels = _pixels(page, rect)
    count = Counter(pixels)
    assert count.most_common(1)[0][0] == generation, count.most_common(5)
    assert count[generation] > 0.3 * len(pixels), count.most_common(5)
    painted = {colour: count[colour] for colour in slices if count[colour]}
    assert not painted, f"engine slices painted over the bar: {painted}"
    band = _pixels(page, {"x": rect["x"], "y": rect["y"] + rect["h"] + 1, "w": rect["w"],
                          "h": 2})
    assert BAND_DECODE in band, Counter(band).most_common(5)
    assert _debug(root, "debug.bandPieces") > 0
    # a click on the bar where the slices lie under it selects the generation
    hit = _debug(root, "debug.hitAt(arg.x, arg.y)",
                 {"x": rect["x"] + rect["w"] * 0.6, "y": rect["y"] + rect["h"] * 0.5})
    assert hit["type"] == "span" and hit["span"] == span, hit
    _debug(root, "debug.setView(arg[0], arg[1])", [float(shown.cols["smp_start"].min()),
                                                    float(shown.cols["smp_end"].max())])


def _check_details(page: Any, root: Any, shown: Shown, figures: bool) -> None:
    """The details panel of the expanded row's generation: engine phases and, with the
    engine's figures in the trace, the engine beside slime."""
    _debug(root, "debug.scrollToRow(debug.rowOfSample(arg))", shown.sample)
    _wait(page, root, "!!debug.spanRect(arg)", shown.generation)
    _center(root)
    rect = _debug(root, "debug.spanRect(arg)", shown.generation)
    page.mouse.click(rect["x"] + min(rect["w"] / 2, 20), rect["y"] + rect["h"] / 2)
    details = root.locator(".stw-details")
    details.get_by_text("Engine phases").wait_for(timeout=WAIT_MS)
    text = details.locator(".stw-engine-phases").inner_text()
    assert "decode" in text and "pd" in text and "%" in text
    if not figures:
        return
    table = details.locator(".stw-engine-figures")
    table.wait_for(timeout=WAIT_MS)
    text = table.inner_text()
    for figure in ("time to first token", "time in queue", "end to end", "prompt tokens",
                   "completion tokens", "cached tokens", "finish reason", "engine [P]",
                   "engine [D]", "slime", "42.5 ms", "87.5 ms", "750 ms", "1,234", "321",
                   "stop", "engine-a", "engine-b"):
        assert figure in text, figure


def _check_tracks(page: Any, root: Any) -> None:
    """Five tracks summed over the engines; the cursor reads them after the load's step;
    per engine, a track per engine that reports it."""
    tracks = _debug(root, "debug.tracks()")
    assert [t["track"] for t in tracks["tracks"]] == [
        "running", "queued", "token_usage", "throughput", "retractions"]
    assert tracks["height"] > 0 and all(t["engine"] is None for t in tracks["tracks"])
    _center(root)
    tracks = _debug(root, "debug.tracks()")
    state = _debug(root, "debug.state()")
    at = LOAD_STEP + 0.6
    box = tracks["tracks"][0]["rect"]
    x = box["x"] + (at - state["viewStart"]) / (state["viewEnd"] - state["viewStart"]) * box["w"]
    page.mouse.click(x, box["y"] + box["h"] / 2)
    _wait(page, root, "debug.tracks().tracks[0].value !== null")
    cursor = _debug(root, "debug.state().cursor")
    assert abs(cursor - at) < 0.25, cursor
    values = {t["track"]: t["value"] for t in _debug(root, "debug.tracks()")["tracks"]}
    assert values == {"running": 9, "queued": 1, "token_usage": 0.75, "throughput": 2500,
                      "retractions": 4}
    root.locator(".stw-field-load select").select_option("split")
    _wait(page, root, "debug.tracks().tracks.length === 9")
    split = _debug(root, "debug.tracks()")
    assert split["split"] and split["height"] > tracks["height"]
    running = {t["engine"]: t["value"] for t in split["tracks"] if t["track"] == "running"}
    assert running == {"engine-a": 5, "engine-b": 4}
    root.locator(".stw-field-load select").select_option("summed")
    _wait(page, root, "debug.tracks().tracks.length === 5")


def _check(page: Any, root_selector: str, shown: Shown, *, figures: bool, load: bool,
           expand: bool = False) -> None:
    root = page.locator(root_selector)
    assert LEGEND_GROUP in root.locator(".stw-legend").inner_text()
    _debug(root, "debug.scrollToRow(debug.rowOfSample(arg))", shown.sample)
    if expand:  # a click on the row's label, as a person expands it
        rect = _debug(root, "debug.spanRect(arg)", shown.generation)
        canvas = root.locator("canvas").first.bounding_box()
        page.mouse.click(canvas["x"] + 8, rect["y"] + rect["h"] / 2)
    _wait(page, root, "debug.state().expanded.length === 1 || debug.state().expandAll")
    # the row is expanded: the engine's decode slice has a lane of its own on screen
    _wait(page, root, "(debug.spanRect(arg) || {h: 0}).h > 6", shown.decode_slice)
    _check_lanes(root, shown)
    _check_collapsed(page, root, shown)
    _check_details(page, root, shown, figures)
    if load:
        _check_tracks(page, root)
    else:
        assert _debug(root, "debug.tracks()")["height"] == 0
        assert root.locator(".stw-field-load").is_hidden()


# --------------------------------------------------------------------------- tests


def test_widget_shows_engine_lanes_band_figures_and_load(lab: JupyterLab, chromium: Any
                                                          ) -> None:
    folder = lab.notebooks / "scene"
    folder.mkdir(exist_ok=True)
    made = scene(folder)
    shown = Shown(made.frames, *_indices(made))
    frames = lab.notebooks / "engine_frames.pickle"
    frames.write_bytes(pickle.dumps(made.frames))
    url = lab.write_notebook("engine.ipynb", [
        "import pickle\nfrom slime_trace_widget import TraceTimeline\n"
        f"tl = TraceTimeline(pickle.loads(open({str(frames)!r}, 'rb').read()))\n"
        f"tl.view_state = {{**tl.view_state, 'expanded': [{shown.row}]}}\ntl",
    ])
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        run_first_widget(page, url)
        root = page.locator(f'{FIRST_WIDGET}[data-ready="1"]')
        assert int(root.get_attribute("data-drawn-rows") or 0) >= 1
        _check(page, FIRST_WIDGET, shown, figures=True, load=True)
    finally:
        page.close()


def test_snapshot_shows_engine_lanes_band_figures_and_load(chromium: Any, tmp_path: Path
                                                            ) -> None:
    from slime_trace_widget import TraceTimeline

    made = scene(tmp_path)
    shown = Shown(made.frames, *_indices(made))
    timeline = TraceTimeline(made.frames)
    timeline.view_state = {**timeline.view_state, "expanded": [shown.row]}
    path = Path(timeline.to_html(tmp_path / "engine.html"))
    with opened(chromium, path) as page:
        _check(page, ".stw-root", shown, figures=True, load=True)


def test_cli_page_shows_engine_lanes_and_band(chromium: Any, tmp_path: Path) -> None:
    """The page the CLI writes from a dump and an engine-trace folder (no figures on the
    requests, no load scraped: the panel shows the phases, no tracks are drawn)."""
    dump = write_demo_dump(tmp_path / "engine_rollout.pt", n_samples=6, seed=8)
    requests = requests_for(load_frames(str(dump), progress=False), pd=True,
                            hosts=tuple(SKEWS))
    engine = store_requests(requests, tmp_path / "engine_traces", SKEWS)
    joined = load_frames(str(dump), progress=False, engine_traces=str(engine))
    core = joined.span_core
    halves = core.index[(core["parent_index"] == requests[0].span) & (core["origin"] == "engine")]
    decode_slice = core.index[core["parent_index"].isin(halves)
                              & (core["name"] == "decode_loop")][0]
    shown = Shown(joined, int(requests[0].span), int(decode_slice))
    out = tmp_path / "page"
    subprocess.run([sys.executable, "-m", "slime_trace_widget", str(dump), "--no-serve",
                    "--out-dir", str(out), "--engine-traces", str(engine)],
                   check=True, capture_output=True, text=True, timeout=600, cwd=ROOT)
    page_path = next(out.glob("*.html"))
    with opened(chromium, page_path) as page:
        _check(page, ".stw-root", shown, figures=False, load=False, expand=True)


def _indices(made: Any) -> tuple[int, int]:
    """The scene's generation and decode slice as ``spans.index`` values."""
    view = encode(made.frames)
    return int(view.span_index[made.generation]), int(view.span_index[made.decode_slice])
