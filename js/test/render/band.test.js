// What a frame paints of engine spans (draw.js, band.js, tracks.js), on a canvas
// that records its fills: a collapsed row's bars are the sample's own spans and the
// engine's phases a band under them; an expanded row draws the engine's lanes;
// the load tracks sit between the axis and the rows. The band draws the partition
// the figures count (data/engine_partition.js): per phase, the seconds on screen
// are analysis.engine_breakdown's for the samples Python joined
// (fixtures/engine_phases.json, written by js/dev/engine_phase_cases.py) and the
// details panel's; a retracted request's wait and re-run nested in its first
// decode_forward show as queue and prefill; request time no slice covers is empty.
// Under a query or a filter the band is the partition of the slices still shown
// (faint where only dimmed ones run; a kept request with no slice shown stands for its
// slices, data/engine_partition.test.js), made once per sample and visibility.

import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload, F_ENGINE } from "../../src/data/decode.js";
import { buildLayout, barBox, bandBox } from "../../src/data/layout.js";
import { spanVisibility, eventVisibility } from "../../src/data/filters.js";
import { Painter } from "../../src/render/draw.js";
import { ColorTable, enginePhaseColor, loadTrackColor } from "../../src/render/colors.js";
import { canvasY } from "../../src/render/hit.js";
import { tracksHeight, TRACKS_PAD } from "../../src/render/tracks.js";
import { enginePhases } from "../../src/data/engine.js";
import { samplePieces } from "../../src/data/engine_partition.js";
import { BandPainter } from "../../src/render/band.js";
import { RunBuffer } from "../../src/render/lod.js";
import { decodedJoinedSample, engineTree, RETRACTED_REQUEST } from "../helpers/engine_spans.js";
import { makePayload } from "../helpers/make_payload.js";
import PYTHON from "../fixtures/engine_phases.json" with { type: "json" };

const THEME = { bg: "#ffffff", bg1: "#f6f7f9", bg2: "#eeeeee", fg0: "#000000", fg1: "#222222", fg2: "#666666", border1: "#cccccc", border2: "#e5e5e5", brand: "#1a73e8", font: "sans-serif", mono: "monospace", error: "#d32f2f", cursor: "#d32f2f", stripe: "#fafafa", selRow: "#e8f0fe", hoverRow: "#f1f3f4", dark: false };
const ALL = { showOpen: true, showEvents: true, showUnmatched: true, attempt: -1, attemptMode: /** @type {"filter"} */ ("filter"), highlightName: -1 };
const PHASES = { queue: ["prefill_waiting"], prefill: ["prefill_forward"], decode: ["decode_loop"], pd: [] };
/** A PD request: its prefill half waits 12-20 and prefills 20-30 while its decode half
 *  bootstraps 12-30 (a PD slice under PD_PHASES), then decodes 30-58. A test adds
 *  spans under the generation by following it with lines at its indent. */
const PD_REQUEST = `
    sglang_generate              10  60   lane 0
      sglang prefill request     12  30   lane 1
        prefill_waiting          12  20   lane 3
        prefill_forward          20  30   lane 3
      sglang decode request      12  58   lane 2
        decode_bootstrap         12  30   lane 4
        decode_loop              30  58   lane 4`;
const PD_PHASES = { ...PHASES, pd: ["decode_bootstrap"] };

/** A canvas whose 2d context keeps every filled rectangle with its fill colour. */
function recordingCanvas() {
  /** @type {{x: number, y: number, w: number, h: number, fill: string, alpha: number}[]} */
  const filled = [];
  /** @type {number[][]} */
  let path = [];
  const state = { fillStyle: "#000", globalAlpha: 1, font: "10px sans-serif" };
  const ctx = new Proxy(state, {
    get(target, key) {
      if (key in target) return /** @type {any} */ (target)[key];
      if (key === "beginPath") return () => (path = []);
      if (key === "rect") return (/** @type {number[]} */ ...args) => path.push(args);
      if (key === "fill") return () => path.forEach(([x, y, w, h]) => filled.push({ x, y, w, h, fill: String(state.fillStyle), alpha: state.globalAlpha }));
      if (key === "fillRect") return (/** @type {number} */ x, /** @type {number} */ y, /** @type {number} */ w, /** @type {number} */ h) => filled.push({ x, y, w, h, fill: String(state.fillStyle), alpha: state.globalAlpha });
      if (key === "measureText") return (/** @type {string} */ text) => ({ width: text.length * 6 });
      return () => {};
    },
    set(target, key, value) {
      /** @type {any} */ (target)[key] = value;
      return true;
    },
  });
  const canvas = { width: 0, height: 0, style: {}, getContext: () => ctx };
  return { canvas: /** @type {any} */ (canvas), filled };
}

/** A generation with one request: waiting, prefill, decode one after the other. */
const SPANS = [
  { sample: 0, start: 0, end: 100, name: "generate_and_rm", lane: 0, depth: 0 },
  { sample: 0, start: 10, end: 60, name: "sglang_generate", lane: 1, depth: 1, parent: 0 },
  { sample: 0, start: 12, end: 58, name: "sglang request", lane: 2, depth: 2, parent: 1, flags: F_ENGINE },
  { sample: 0, start: 12, end: 20, name: "prefill_waiting", lane: 3, depth: 3, parent: 2, flags: F_ENGINE },
  { sample: 0, start: 20, end: 30, name: "prefill_forward", lane: 3, depth: 3, parent: 2, flags: F_ENGINE },
  { sample: 0, start: 30, end: 58, name: "decode_loop", lane: 3, depth: 3, parent: 2, flags: F_ENGINE },
];

/**
 * @param {boolean} expanded
 * @param {boolean} [withLoad]
 * @param {Record<string, any>[]} [spans]
 * @param {Record<string, string[]>} [phases]
 */
function scene(expanded, withLoad = false, spans = SPANS, phases = PHASES) {
  const { payload, spanNew } = makePayload({
    samples: [{}],
    spans,
    load: withLoad ? [{ engine: 0, track: "running", ts: 0, value: 2 }, { engine: 0, track: "queued", ts: 0, value: 1 }] : [],
    meta: { engine_phases: phases, load_engines: withLoad ? ["e"] : [] },
  });
  const d = decodePayload(payload);
  const L = buildLayout(d, Uint32Array.from([0]), () => expanded, 20);
  const tracksH = tracksHeight(d.load, false);
  const g = { width: 1000, height: 400, gutter: 200, plotX: 200, plotW: 800, axisH: 26 + tracksH, tracksH, scrollTop: 0, t0: 0, t1: 100 };
  const { canvas, filled } = recordingCanvas();
  const painter = new Painter(canvas);
  painter.resize(1000, 400, 1);
  const colors = new ColorTable(d.names, THEME);
  painter.paint({ d, L, g, vis: spanVisibility(d, ALL), evVis: eventVisibility(d, ALL), theme: THEME, colors, cursor: 40, brush: null, selection: null, hover: null, hoverRow: -1, selRow: -1, raiseShown: false, loadSplit: false });
  return { d, L, g, filled, colors, painter, at: (/** @type {number} */ i) => spanNew[i] };
}

/**
 * The last colour filled over a point (the one on screen).
 * @param {{x: number, y: number, w: number, h: number, fill: string}[]} filled
 * @param {number} x
 * @param {number} y
 */
function colorAt(filled, x, y) {
  let found = "";
  for (const r of filled) if (x >= r.x && x < r.x + r.w && y >= r.y && y < r.y + r.h) found = r.fill;
  return found;
}

test("a collapsed row: the generation's colour over its slices, the engine's phases in a band under it", () => {
  const { d, L, g, filled, colors, painter } = scene(false);
  const generation = colors.base(d.names.indexOf("sglang_generate"));
  const bar = barBox(L, 0, 0);
  const mid = canvasY(g, bar.y + bar.h / 2);
  for (const t of [15, 25, 45]) assert.equal(colorAt(filled, 200 + t * 8, mid), generation, `t=${t}`);
  const band = bandBox(L, 0);
  const by = canvasY(g, band.y + band.h / 2);
  assert.equal(colorAt(filled, 200 + 15 * 8, by), enginePhaseColor("queue"));
  assert.equal(colorAt(filled, 200 + 25 * 8, by), enginePhaseColor("prefill"));
  assert.equal(colorAt(filled, 200 + 45 * 8, by), enginePhaseColor("decode"));
  assert.equal(colorAt(filled, 200 + 80 * 8, by), THEME.bg, "no band where the engine did nothing");
  assert.equal(painter.band.drawn, 3, "a piece a phase; the request span itself none");
  // nothing of the engine is filled inside the bar
  const engineFills = new Set(["prefill_waiting", "prefill_forward", "decode_loop", "sglang request"].map((name) => colors.base(d.names.indexOf(name))));
  assert.ok(!filled.some((r) => engineFills.has(r.fill) && r.y < bar.y + bar.h + g.axisH && r.y + r.h > bar.y + g.axisH && r.h > 3));
});

test("an expanded row draws the engine's lanes and no band", () => {
  const { d, L, g, filled, colors, painter } = scene(true);
  const lane = barBox(L, 0, 3);
  assert.equal(colorAt(filled, 200 + 45 * 8, canvasY(g, lane.y + lane.h / 2)), colors.base(d.names.indexOf("decode_loop")));
  assert.equal(painter.band.drawn, 0);
});

test("the load tracks sit between the axis and the rows", () => {
  const { g, filled } = scene(false, true);
  assert.ok(g.tracksH > 0);
  const top = g.axisH - g.tracksH + TRACKS_PAD;
  assert.ok(filled.some((r) => r.fill === loadTrackColor("running") && r.y >= top - 1 && r.y < top + 26), "the running track's swatch");
  assert.ok(filled.some((r) => r.fill === loadTrackColor("queued")), "the queued track's swatch");
});

test("where slices of several phases overlap, the band shows the phase the panel counts", () => {
  // the PD request and a second request prefilling while it decodes
  const spans = engineTree(`${PD_REQUEST}
      sglang request             40  50   lane 5
        prefill_forward          40  50   lane 6
  `);
  const { d, L, g, filled, at } = scene(false, false, spans, PD_PHASES);
  const band = bandBox(L, 0);
  const by = canvasY(g, band.y + band.h / 2);
  const phaseAt = (/** @type {number} */ t) => d.bandPhases.find((phase) => enginePhaseColor(phase) === colorAt(filled, 200 + t * 8, by));
  assert.deepEqual([15, 25, 35, 45, 55].map(phaseAt), ["queue", "prefill", "decode", "prefill", "decode"]);
  // the picture's seconds per phase (one pixel an eighth of a second) are the panel's
  /** @type {Record<string, number>} */
  const drawn = {};
  for (let x = 0; x < 800; x++) {
    const phase = phaseAt((x + 0.5) / 8);
    if (phase) drawn[phase] = (drawn[phase] ?? 0) + 1 / 8;
  }
  const counted = Object.fromEntries(enginePhases(d, at(0)).map((row) => [row.phase, row.dur]));
  assert.deepEqual(counted, { queue: 8, prefill: 20, decode: 18 });
  assert.deepEqual(drawn, counted);
});

// ------------------------------------------------- the band is the figures

/** Pixels a second: every piece of the fixture's samples (float32 slivers of a µs among
 *  them) is wider than a pixel, none merged. */
const PX_PER_SEC = 1e7;
/** Pixels of one painted window (float32 positions exact to a thousandth of one). */
const PLOT_W = 100_000;

/**
 * Seconds per phase the band of sample 0's collapsed row shows: painted window by
 * window, each stretch of the band in the colour painted last over it.
 * @param {import("../../src/data/decode.js").Data} d
 * @param {number} t0 first instant to look at
 * @param {number} t1 last
 * @param {Uint8Array} [vis] the spans' visibility (0 hidden, 2 dimmed): all shown
 */
function drawnSeconds(d, t0, t1, vis = spanVisibility(d, ALL)) {
  const L = buildLayout(d, Uint32Array.from([0]), () => false, 20);
  const g = { width: 200 + PLOT_W, height: 400, gutter: 200, plotX: 200, plotW: PLOT_W, axisH: 30, tracksH: 0, scrollTop: 0, t0, t1 };
  const box = bandBox(L, 0);
  const y = canvasY(g, box.y + box.h / 2);
  const phaseOf = new Map(d.bandPhases.map((phase) => [enginePhaseColor(phase), phase]));
  /** @type {Record<string, number>} */
  const seconds = {};
  const band = new BandPainter();
  const span = PLOT_W / PX_PER_SEC;
  for (let from = t0; from < t1; from += span) {
    const sc = { t0: from, t1: from + span, pxPerSec: PX_PER_SEC, x0: g.plotX };
    const { canvas, filled } = recordingCanvas();
    band.paint(canvas.getContext("2d"), /** @type {any} */ ({ d, L, g, vis }), 0, 1, sc, new RunBuffer());
    const rects = filled.filter((r) => y >= r.y && y < r.y + r.h);
    const edges = [...new Set(rects.flatMap((r) => [r.x, r.x + r.w]))]
      .map((x) => Math.min(Math.max(x, g.plotX), g.plotX + PLOT_W)).sort((a, b) => a - b);
    for (let k = 0; k + 1 < edges.length; k++) {
      const mid = (edges[k] + edges[k + 1]) / 2;
      const top = rects.findLast((r) => mid >= r.x && mid < r.x + r.w);
      if (!top) continue;
      const phase = phaseOf.get(top.fill) ?? top.fill;
      seconds[phase] = (seconds[phase] ?? 0) + (edges[k + 1] - edges[k]) / PX_PER_SEC;
    }
  }
  return seconds;
}

/**
 * The phases whose seconds differ by more than `tolerance`, said.
 * @param {Record<string, number>} got
 * @param {Record<string, number>} want
 * @param {number} tolerance
 * @param {string} what
 * @returns {string[]}
 */
function differences(got, want, tolerance, what) {
  return [...new Set([...Object.keys(got), ...Object.keys(want)])]
    .filter((phase) => !(Math.abs((got[phase] ?? 0) - (want[phase] ?? 0)) <= tolerance))
    .map((phase) => `${what}: ${phase} drawn ${got[phase] ?? 0} s, counted ${want[phase] ?? 0} s`);
}

/**
 * @param {Record<string, number>} got
 * @param {Record<string, number>} want
 * @param {number} tolerance
 * @param {string} what
 */
function assertSeconds(got, want, tolerance, what) {
  assert.deepEqual(differences(got, want, tolerance, what), []);
}

test("samples joined by Python: the band draws engine_breakdown's seconds per phase", () => {
  /** @type {string[]} */
  const wrong = [];
  for (const sample of PYTHON.cases) {
    const d = decodedJoinedSample(sample, PYTHON.phases);
    const pieces = samplePieces(d, 0);
    let narrowest = Infinity;
    for (let i = 0; i < pieces.n; i++) narrowest = Math.min(narrowest, pieces.end[i] - pieces.start[i]);
    assert.ok(narrowest * PX_PER_SEC > 1, `${sample.name}: a piece of ${narrowest} s would merge below a pixel`);
    const times = sample.spans.flatMap((span) => [span.start, span.end]);
    const drawn = drawnSeconds(d, Math.min(...times) - 1, Math.max(...times) + 1);
    // the payload's times are float32 from the sample's start
    wrong.push(...differences(drawn, sample.seconds, 2e-5, sample.name));
  }
  assert.deepEqual(wrong, []);
  assert.ok(PYTHON.cases.some((sample) => sample.events.length), "a retraction among them");
  const nested = (/** @type {{engine: boolean, name: string, parent: number}[]} */ spans) => spans.some((span) => {
    const parent = spans[span.parent];
    return span.engine && parent?.engine && !parent.name.endsWith(" request") && parent.name !== PYTHON.kv_sender_span;
  });
  assert.ok(PYTHON.cases.some((sample) => nested(sample.spans)), "a slice nested in a slice among them");
});

test("a retraction: the wait and the re-run nested in decode_forward show as the panel counts them", () => {
  const spans = engineTree(RETRACTED_REQUEST);
  const phases = { queue: ["prefill_waiting"], prefill: ["prefill_forward"], decode: ["decode_forward"], pd: [] };
  const events = [{ sample: 0, ts: 5, name: "retract", lane: 2, parent: 3 }];
  const d = decodePayload(makePayload({ samples: [{}], spans, events, meta: { engine_phases: phases } }).payload);
  const pieces = samplePieces(d, 0);
  const shown = Array.from({ length: pieces.n }, (_, i) => [pieces.start[i], pieces.end[i], d.bandPhases[pieces.code[i] - 1]].map((v) => (typeof v === "number" ? Math.round(v * 1000) / 1000 : v)));
  // 1-2.1 s the request runs no slice: nothing; the wait (in decode_forward) and
  // prefill_waiting are one queue piece
  assert.deepEqual(shown, [[2.1, 3.1, "prefill"], [3.1, 5, "decode"], [5, 5.5, "queue"], [5.5, 6, "prefill"], [6, 9, "decode"]]);
  assert.equal(samplePieces(d, 0), pieces, "made once, kept for every frame");
  /** @type {Record<string, number>} */
  const counted = Object.fromEntries(enginePhases(d, 0).map((row) => [row.phase, row.dur]));
  assertSeconds(counted, { queue: 0.5, prefill: 1.5, decode: 4.9 }, 1e-6, "the panel");
  assertSeconds(drawnSeconds(d, 0, 10), counted, 1e-5, "the band");
  // hidden with its slice: the first decode_forward's own time and the wait in it
  const vis = spanVisibility(d, ALL);
  vis[spanAt(d, "decode_forward", 3.1)] = 0;
  assertSeconds(drawnSeconds(d, 0, 10, vis), { queue: 0.3, prefill: 1.5, decode: 2.8 }, 1e-5, "a slice hidden");
});

// ------------------------------------------------- what the filters leave

/**
 * The span named `name` that starts at `start`.
 * @param {import("../../src/data/decode.js").Data} d
 * @param {string} name
 * @param {number} start
 */
function spanAt(d, name, start) {
  for (let i = 0; i < d.nSpans; i++) if (d.names[d.spanName[i]] === name && Math.abs(d.spanStart[i] - start) < 1e-6) return i;
  throw new Error(`no ${name} at ${start}`);
}

/**
 * The stretches of sample 0's band, painted once over [0, t1) at 10 px/s (whole
 * seconds here): [from, to, phase, "faint"?] in time order.
 * @param {import("../../src/data/decode.js").Data} d
 * @param {Uint8Array} vis
 * @param {number} t1
 * @param {BandPainter} [band]
 */
function bandStretches(d, vis, t1, band = new BandPainter()) {
  const L = buildLayout(d, Uint32Array.from([0]), () => false, 20);
  const g = { width: 1000, height: 400, gutter: 200, plotX: 200, plotW: 800, axisH: 30, tracksH: 0, scrollTop: 0, t0: 0, t1 };
  const { canvas, filled } = recordingCanvas();
  band.paint(canvas.getContext("2d"), /** @type {any} */ ({ d, L, g, vis }), 0, 1, { t0: 0, t1, pxPerSec: 10, x0: 200 }, new RunBuffer());
  const phaseOf = new Map(d.bandPhases.map((phase) => [enginePhaseColor(phase), phase]));
  return filled
    .sort((a, b) => a.x - b.x)
    .map((r) => [(r.x - 200) / 10, (r.x + r.w - 200) / 10, phaseOf.get(r.fill), ...(r.alpha < 1 ? ["faint"] : [])]);
}

/** Two requests of one sample decoding at once, attempt 0 and attempt 1. */
function twoAttempts(secondName = "decode_loop") {
  const spans = [
    { sample: 0, start: 0, end: 14, name: "sglang_generate", lane: 0, depth: 0 },
    { sample: 0, start: 0, end: 10, name: "sglang request", lane: 1, depth: 1, parent: 0, flags: F_ENGINE, attempt: 0 },
    { sample: 0, start: 0, end: 10, name: "decode_loop", lane: 2, depth: 2, parent: 1, flags: F_ENGINE, attempt: 0 },
    { sample: 0, start: 2, end: 12, name: "sglang request", lane: 3, depth: 1, parent: 0, flags: F_ENGINE, attempt: 1 },
    { sample: 0, start: 2, end: 12, name: secondName, lane: 4, depth: 2, parent: 3, flags: F_ENGINE, attempt: 1 },
  ];
  return decodePayload(makePayload({ samples: [{ attempts: 2 }], spans, meta: { engine_phases: PHASES } }).payload);
}

test("a query: the band draws the kept slices over the time hidden slices held", () => {
  const spans = engineTree(PD_REQUEST);
  const d = decodePayload(makePayload({ samples: [{}], spans, meta: { engine_phases: PD_PHASES } }).payload);
  const all = bandStretches(d, spanVisibility(d, ALL), 64);
  assert.deepEqual(all, [[12, 20, "queue"], [20, 30, "prefill"], [30, 58, "decode"]]);
  // a query for decode* keeps the decode half (and the generation)
  const keep = Uint8Array.from({ length: d.nSpans }, (_, i) => (/^decode|^sglang_generate$/.test(d.names[d.spanName[i]]) ? 1 : 0));
  assert.deepEqual(bandStretches(d, spanVisibility(d, { ...ALL, keep }), 64), [[12, 30, "pd"], [30, 58, "decode"]]);
  // the details panel counts every slice whatever the band shows
  const generation = spanAt(d, "sglang_generate", 10);
  assert.deepEqual(Object.fromEntries(enginePhases(d, generation).map((row) => [row.phase, row.dur])), { queue: 8, prefill: 10, decode: 28 });
});

test("the attempt filter: a shown slice draws over its whole time, also where a hidden one ran", () => {
  const d = twoAttempts();
  assert.deepEqual(bandStretches(d, spanVisibility(d, { ...ALL, attempt: 1 }), 16), [[2, 12, "decode"]]);
  assert.deepEqual(bandStretches(d, spanVisibility(d, { ...ALL, attempt: 0 }), 16), [[0, 10, "decode"]]);
  // a hidden prefill_forward over a shown decode_loop: the decode_loop's phase
  const overlapped = twoAttempts("prefill_forward");
  assert.deepEqual(bandStretches(overlapped, spanVisibility(overlapped, ALL), 16), [[0, 2, "decode"], [2, 12, "prefill"]]);
  assert.deepEqual(bandStretches(overlapped, spanVisibility(overlapped, { ...ALL, attempt: 0 }), 16), [[0, 10, "decode"]]);
});

test("dimmed slices: the band is faint only where no shown slice runs, in the shown ones' phase", () => {
  const d = twoAttempts();
  // attempt 1 highlighted: attempt 0's decode_loop dimmed
  assert.deepEqual(bandStretches(d, spanVisibility(d, { ...ALL, attempt: 1, attemptMode: "highlight" }), 16), [[0, 2, "decode", "faint"], [2, 12, "decode"]]);
  // the name highlight on decode_loop: prefill_forward, first in the priority, is dimmed,
  // so the highlighted decode_loop shows where it runs and prefill faint after it
  const overlapped = twoAttempts("prefill_forward");
  const highlightName = overlapped.names.indexOf("decode_loop");
  assert.deepEqual(bandStretches(overlapped, spanVisibility(overlapped, { ...ALL, highlightName }), 16), [[0, 10, "decode"], [10, 12, "prefill", "faint"]]);
  // all dimmed: the partition the figures count, faint
  const focus = new Uint8Array(overlapped.nSpans);
  assert.deepEqual(bandStretches(overlapped, spanVisibility(overlapped, { ...ALL, focus }), 16), [[0, 2, "decode", "faint"], [2, 12, "prefill", "faint"]]);
});

test("a hidden slice between two shown ones: the inner one nests in the outer", () => {
  const spans = engineTree(`
    sglang_generate            0   12
      sglang request           0   10   lane 1
        decode_loop            0   10   lane 2
          prefill_forward      2   6    lane 3
            prefill_waiting    3   4    lane 4
  `);
  const d = decodePayload(makePayload({ samples: [{}], spans, meta: { engine_phases: PHASES } }).payload);
  assert.deepEqual(bandStretches(d, spanVisibility(d, ALL), 16), [[0, 2, "decode"], [2, 3, "prefill"], [3, 4, "queue"], [4, 6, "prefill"], [6, 10, "decode"]]);
  const vis = spanVisibility(d, ALL);
  vis[spanAt(d, "prefill_forward", 2)] = 0;
  assert.deepEqual(bandStretches(d, vis, 16), [[0, 3, "decode"], [3, 4, "queue"], [4, 10, "decode"]]);
});

test("the band's pieces are made once per sample and visibility, not every frame", () => {
  const d = twoAttempts();
  const band = new BandPainter();
  const vis = spanVisibility(d, { ...ALL, attempt: 1 });
  bandStretches(d, vis, 16, band);
  const made = band.shownPieces(d, vis, 0);
  bandStretches(d, vis, 16, band);
  assert.equal(band.shownPieces(d, vis, 0), made, "the next frame draws the same pieces");
  const other = spanVisibility(d, ALL);
  assert.deepEqual(bandStretches(d, other, 16, band), [[0, 12, "decode"]]);
  assert.notEqual(band.shownPieces(d, other, 0), made, "a new visibility, new pieces");
});
