import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload, F_VIRTUAL, F_PD_DETAIL, PD_PREFILL, PD_DECODE } from "../../src/data/decode.js";
import { buildLayout, barBox } from "../../src/data/layout.js";
import { spanVisibility, eventVisibility } from "../../src/data/filters.js";
import { hitTest, xOf, canvasY, deviceToCss, clientToCanvas, pdBand, markerGeom, timeAt, isItem } from "../../src/render/hit.js";
import { makePayload } from "../helpers/make_payload.js";

const ALL = { showOpen: true, showEvents: true, showUnmatched: true, attempt: -1, attemptMode: /** @type {"filter"} */ ("filter"), highlightName: -1 };

function setup(expandedSamples = []) {
  const { payload, spanNew, evNew } = makePayload({
    samples: [{}, {}, {}],
    spans: [
      { sample: 0, start: 0, end: 100, name: "generate_and_rm", lane: 0, depth: 0 },
      { sample: 0, start: 10, end: 40, name: "sglang_generate", lane: 1, depth: 1, parent: 0 },
      { sample: 0, start: 50, end: 90, name: "tool_call", lane: 1, depth: 1, parent: 0 },
      { sample: 0, start: 10, end: 20, name: "[P]", lane: 2, depth: 2, flags: F_VIRTUAL, parent: 1 },
      { sample: 0, start: 20, end: 40, name: "[D]", lane: 3, depth: 2, flags: F_VIRTUAL, parent: 1 },
      { sample: 0, start: 10, end: 20, name: "sglang_pd_prefill", lane: 2, depth: 2, flags: F_PD_DETAIL, parent: 1 },
      { sample: 1, start: 30, end: 60, name: "generate_and_rm", lane: 0, depth: 0 },
      { sample: 2, start: 0, end: 5, name: "generate_and_rm", lane: 0, depth: 0 },
    ],
    segs: [
      { span: 3, start: 10, end: 12, name: "prefill_bootstrap_queue" },
      { span: 3, start: 12, end: 20, name: "prefill_forward" },
      { span: 4, start: 20, end: 40, name: "decode_forward" },
    ],
    events: [
      { sample: 1, ts: 45, name: "tool_parse", lane: 0 },
      { sample: 1, ts: 45.1, name: "tool_parse", lane: 0 },
      { sample: 1, ts: 55, name: "orphan_end", lane: 0, kind: 1 },
    ],
  });
  const d = decodePayload(payload);
  const rows = Uint32Array.from([0, 1, 2]);
  const L = buildLayout(d, rows, (s) => expandedSamples.includes(s), 20);
  const g = { width: 1000, height: 400, gutter: 200, plotX: 210, plotW: 780, axisH: 30, scrollTop: 0, t0: 0, t1: 100 };
  const vis = spanVisibility(d, ALL);
  const evVis = eventVisibility(d, ALL);
  return { d, L, g, vis, evVis, spanNew, evNew };
}

/** Centre (CSS px) of a span's bar, computed from the layout as draw does. */
function centre(ctx, span, lane) {
  const { d, L, g } = ctx;
  const r = L.rowOfSample[d.spanSample[span]];
  const box = barBox(L, r, lane);
  return { x: (xOf(g, d.spanStart[span]) + xOf(g, d.spanEnd[span])) / 2, y: canvasY(g, box.y + box.h * 0.8) }; // below the event markers on the top edge
}

test("device pixels map back to CSS px for any dpr", () => {
  for (const dpr of [1, 1.25, 2, 3]) {
    const css = deviceToCss(300 * dpr, 50 * dpr, dpr);
    assert.ok(Math.abs(css.x - 300) < 1e-9 && Math.abs(css.y - 50) < 1e-9);
  }
  assert.deepEqual(clientToCanvas(110, 220, { left: 10, top: 20 }), { x: 100, y: 200 });
});

test("hit at the centre of each drawn bar finds that span (dpr 1, 2, 3)", () => {
  const ctx = setup([0]);
  const { d, L, g, vis, evVis, spanNew } = ctx;
  for (const dpr of [1, 2, 3]) {
    for (const [orig, lane] of [[0, 0], [1, 1], [2, 1], [6, 0], [7, 0]]) {
      const i = spanNew[orig];
      const c = centre(ctx, i, lane);
      const p = deviceToCss(Math.round(c.x * dpr), Math.round(c.y * dpr), dpr);
      const h = hitTest(d, L, g, vis, evVis, p.x, p.y);
      assert.ok(h && h.type === "span", `span ${orig} dpr ${dpr}: ${JSON.stringify(h)}`);
      assert.equal(h.type === "span" && h.span, i);
    }
  }
});

test("collapsed row: deepest span wins; PD band gives segments", () => {
  const ctx = setup([]);
  const { d, L, g, vis, evVis, spanNew } = ctx;
  const box = barBox(L, 0, 0);
  // Upper part of the bar at t=60: tool_call (depth 1) over generate_and_rm.
  let h = hitTest(d, L, g, vis, evVis, xOf(g, 60), canvasY(g, box.y + 2));
  assert.equal(h && h.type === "span" && h.span, spanNew[2]);
  // t=95: only the parent.
  h = hitTest(d, L, g, vis, evVis, xOf(g, 95), canvasY(g, box.y + 2));
  assert.equal(h && h.type === "span" && h.span, spanNew[0]);
  // Prefill band at t=15 -> prefill_forward segment of [P].
  const pb = pdBand(box, PD_PREFILL);
  h = hitTest(d, L, g, vis, evVis, xOf(g, 15), canvasY(g, pb.y + pb.h / 2));
  assert.ok(h && h.type === "segment");
  assert.equal(h.type === "segment" && d.names[d.segName[h.seg]], "prefill_forward");
  assert.equal(h.type === "segment" && h.span, spanNew[3]);
  const db = pdBand(box, PD_DECODE);
  h = hitTest(d, L, g, vis, evVis, xOf(g, 30), canvasY(g, db.y + db.h / 2));
  assert.equal(h && h.type === "segment" && d.names[d.segName[h.seg]], "decode_forward");
  // PD-detail spans are never hit directly.
  assert.ok(!(h && h.type === "span" && h.span === spanNew[5]));
});

test("expanded row: PD lanes hit segments", () => {
  const ctx = setup([0]);
  const { d, L, g, vis, evVis } = ctx;
  const box = barBox(L, 0, 2);
  const h = hitTest(d, L, g, vis, evVis, xOf(g, 11), canvasY(g, box.y + box.h / 2));
  assert.equal(h && h.type === "segment" && d.names[d.segName[h.seg]], "prefill_bootstrap_queue");
});

test("events and clusters are hit before spans; labels in the gutter; axis on top", () => {
  const ctx = setup([]);
  const { d, L, g, vis, evVis, evNew } = ctx;
  const box = barBox(L, 1, 0);
  const mg = markerGeom(box);
  let h = hitTest(d, L, g, vis, evVis, xOf(g, 45.05), canvasY(g, mg.cy));
  assert.ok(h && h.type === "event", JSON.stringify(h));
  assert.equal(h.type === "event" && h.count, 2);
  assert.deepEqual(h.type === "event" && h.members.sort(), [evNew[0], evNew[1]].sort());
  h = hitTest(d, L, g, vis, evVis, xOf(g, 55), canvasY(g, mg.cy));
  assert.equal(h && h.type === "event" && d.evKind[h.ev], 1);
  // Hidden events are not hit.
  const none = eventVisibility(d, { ...ALL, showEvents: false, showUnmatched: false });
  h = hitTest(d, L, g, vis, none, xOf(g, 45.05), canvasY(g, mg.cy));
  assert.equal(h && h.type, "span");
  h = hitTest(d, L, g, vis, evVis, 50, canvasY(g, mg.cy));
  assert.equal(h && h.type, "label");
  assert.equal(h && h.type === "label" && h.sample, 1);
  h = hitTest(d, L, g, vis, evVis, 500, 10);
  assert.equal(h && h.type, "axis");
  assert.ok(Math.abs((h && h.type === "axis" ? h.t : 0) - timeAt(g, 500)) < 1e-9);
  // Below the last row: nothing.
  assert.equal(hitTest(d, L, g, vis, evVis, 500, canvasY(g, L.totalHeight + 5)), null);
});

test("scrolling shifts rows", () => {
  const ctx = setup([]);
  const { d, L, g, vis, evVis, spanNew } = ctx;
  const g2 = { ...g, scrollTop: L.rowTop[2] };
  const box = barBox(L, 2, 0);
  const h = hitTest(d, L, g2, vis, evVis, xOf(g2, 2.5), canvasY(g2, box.y + 3));
  assert.equal(h && h.type === "span" && h.span, spanNew[7]);
});

test("isItem: spans, segments and events are what the details panel describes", () => {
  assert.deepEqual(["span", "segment", "event", "row", "label", "axis"].map((type) => isItem(/** @type {any} */ ({ type }))),
    [true, true, true, false, false, false]);
  assert.equal(isItem(null), false);
  assert.equal(isItem(undefined), false);
});
