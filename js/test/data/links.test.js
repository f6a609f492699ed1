// Which links touch a selection (links.js), and the arrows they give on the
// plot (arrows.js): groups expanded from their hub, retries both ways, remote
// continuation, ends out of range, hidden rows and ends off the plot.

import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload } from "../../src/data/decode.js";
import { buildLayout } from "../../src/data/layout.js";
import { spanVisibility, eventVisibility } from "../../src/data/filters.js";
import { linksOf, groupMembers, endOf, describe, endOfHit, noteMasks, filteredOut } from "../../src/data/links.js";
import { arrowsFor, clipSegment } from "../../src/render/arrows.js";
import { makePayload } from "../helpers/make_payload.js";

const ALL = { showOpen: true, showEvents: true, showUnmatched: true, attempt: -1, attemptMode: /** @type {"filter"} */ ("filter"), highlightName: -1 };

/** Three group copies (samples 0-2, hub in 1), a retried sample 3, a remote one 4. */
function scene() {
  const built = makePayload({
    samples: [{}, {}, {}, {}, {}],
    spans: [
      { sample: 0, start: 0, end: 10, name: "group_rm" },
      { sample: 1, start: 0, end: 10, name: "group_rm" },
      { sample: 2, start: 0, end: 10, name: "group_rm" },
      { sample: 3, start: 1, end: 2, name: "generate" },
      { sample: 4, start: 20, end: 30, name: "reward_model" },
      { sample: 0, start: 2, end: 3, name: "tool", lane: 1, depth: 1, parent: 0 },
    ],
    events: [
      { sample: 3, ts: 3, name: "attempt_start", attempt: 1 },
      { sample: 3, ts: 5, name: "attempt_start", attempt: 2 },
      { sample: 4, ts: 21, name: "trace_import", parent: 4 },
    ],
    links: [
      { kind: "group", from: { span: 0 }, to: { span: 1 } },
      { kind: "group", from: { span: 2 }, to: { span: 1 } },
      { kind: "attempt", from: { event: 0 }, to: { span: 3 } },
      { kind: "attempt", from: { event: 1 }, to: { event: 0 } },
      { kind: "remote", from: { span: 4 }, to: { event: 2 } },
    ],
  });
  const d = decodePayload(built.payload);
  /** @param {number} i */
  const span = (i) => built.spanNew[i];
  /** @param {number} j */
  const ev = (j) => built.evNew[j];
  return { d, span, ev };
}

/** @param {{kind: string, from: {kind: string, index: number}, to: {kind: string, index: number}}[]} links */
const flat = (links) => links.map((l) => `${l.kind} ${l.from.kind}${l.from.index}>${l.to.kind}${l.to.index}`).sort();

test("a group member links to every other member, the hub too", () => {
  const { d, span } = scene();
  const members = [span(0), span(1), span(2)].sort((a, b) => a - b);
  for (const m of members) {
    assert.deepEqual(groupMembers(d, m), members);
    assert.deepEqual(flat(linksOf(d, "span", m)), flat(members.filter((o) => o !== m).map((o) => ({ kind: "group", from: { kind: "span", index: m }, to: { kind: "span", index: o } }))));
  }
  assert.deepEqual(groupMembers(d, span(5)), [], "a child of a member is no member");
  assert.deepEqual(linksOf(d, "span", span(5)), []);
});

test("attempts link both ways from the middle retry; remote links the export and the mark", () => {
  const { d, span, ev } = scene();
  assert.deepEqual(flat(linksOf(d, "event", ev(0))), [`attempt event${ev(0)}>span${span(3)}`, `attempt event${ev(1)}>event${ev(0)}`].sort());
  const labels = linksOf(d, "event", ev(0)).map((l) => describe(l, { kind: "event", index: ev(0) }).label).sort();
  assert.deepEqual(labels, ["next attempt", "previous attempt"]);
  const remote = linksOf(d, "span", span(4));
  assert.deepEqual(flat(remote), [`remote span${span(4)}>event${ev(2)}`]);
  assert.deepEqual(describe(remote[0], { kind: "span", index: span(4) }), { label: "continued remotely", target: { kind: "event", index: ev(2) } });
  assert.equal(describe(remote[0], { kind: "event", index: ev(2) }).label, "exported from");
});

test("ends out of range are dropped; a payload without link columns has none", () => {
  const { d } = scene();
  assert.equal(endOf(d, d.nSpans), null);
  assert.equal(endOf(d, -1 - d.nEvents), null);
  assert.equal(endOf(d, -0x80000000), null);
  const bare = makePayload({ samples: [{}], spans: [{ sample: 0, start: 0, end: 1, name: "a" }] }).payload;
  delete bare.buffers.link_kind;
  delete bare.buffers.link_from;
  delete bare.buffers.link_to;
  const d2 = decodePayload(bare);
  assert.equal(d2.nLinks, 0);
  assert.deepEqual(linksOf(d2, "span", 0), []);
  assert.equal(endOfHit({ type: "axis", t: 0 }), null);
});

test("clipSegment cuts at the plot's edges and misses what lies outside", () => {
  const r = { x0: 0, y0: 0, x1: 100, y1: 100 };
  assert.deepEqual(clipSegment({ x: 10, y: 10 }, { x: 90, y: 90 }, r), [0, 1]);
  assert.deepEqual(clipSegment({ x: 50, y: 50 }, { x: 50, y: 250 }, r), [0, 0.25]);
  assert.deepEqual(clipSegment({ x: -100, y: 50 }, { x: 100, y: 50 }, r), [0.5, 1]);
  assert.equal(clipSegment({ x: -10, y: -10 }, { x: -10, y: 200 }, r), null);
});

/** @param {import("../../src/data/decode.js").Data} d */
function geometry(d) {
  const rows = Uint32Array.from({ length: d.nSamples }, (_, i) => i);
  const L = buildLayout(d, rows, () => false, 20);
  const g = { width: 1000, height: 400, gutter: 200, plotX: 210, plotW: 780, axisH: 30, scrollTop: 0, t0: 0, t1: 40 };
  return { L, g, vis: spanVisibility(d, ALL), evVis: eventVisibility(d, ALL) };
}

test("arrows go from the selected member to the others' rows; off-plot ends are cut at the edge", () => {
  const { d, span, ev } = scene();
  const { L, g, vis, evVis } = geometry(d);
  const sel = { type: /** @type {"span"} */ ("span"), row: 0, sample: 0, span: span(0), t: 0 };
  const arrows = arrowsFor(d, L, g, vis, evVis, sel);
  assert.equal(arrows.length, 2);
  const rowY = (/** @type {number} */ s) => L.rowTop[L.rowOfSample[s]] + g.axisH;
  for (const a of arrows) {
    assert.equal(a.kind, "group");
    assert.ok(Math.abs(a.x0 - a.x1) < 1e-9, "copies share their times: a vertical arrow");
    assert.ok(a.y0 >= rowY(0) && a.y0 < rowY(1));
    assert.ok(!a.cutFrom && !a.cutTo);
  }
  assert.deepEqual(arrows.map((a) => d.spanSample[a.to.index]).sort(), [1, 2]);

  // Zoomed so the older attempt's span is off the left edge: the arrow stops there.
  const zoomed = { ...g, t0: 2.5, t1: 40 };
  const retry = arrowsFor(d, L, zoomed, vis, evVis, { type: "event", row: 3, sample: 3, ev: ev(0), count: 1, members: [ev(0)], t: 3 });
  const back = retry.find((a) => a.to.kind === "span");
  assert.ok(back && back.cutTo && Math.abs(back.x1 - zoomed.plotX) < 1e-6);
  const fwd = retry.find((a) => a.from.kind === "event" && a.from.index === ev(1));
  assert.ok(fwd && !fwd.cutFrom && !fwd.cutTo);

  // A hidden row draws no arrow to it.
  const noHub = buildLayout(d, Uint32Array.from([0, 2, 3, 4]), () => false, 20);
  assert.deepEqual(arrowsFor(d, noHub, g, vis, evVis, sel).map((a) => d.spanSample[a.to.index]), [2]);
  // A filtered-out end neither.
  const hidden = vis.slice();
  hidden[span(2)] = 0;
  assert.deepEqual(arrowsFor(d, L, g, hidden, evVis, sel).map((a) => d.spanSample[a.to.index]), [1]);
  // Nothing selected, or a row: no arrows.
  assert.deepEqual(arrowsFor(d, L, g, vis, evVis, null), []);
  assert.deepEqual(arrowsFor(d, L, g, vis, evVis, { type: "row", row: 0, sample: 0, t: 0 }), []);
});

test("a link target the filter box hides is known as filtered out", () => {
  const { d, span, ev } = scene();
  const end = (/** @type {"span"|"event"} */ kind, /** @type {number} */ index) => ({ kind, index });
  assert.equal(filteredOut(d, end("span", span(0))), false, "no masks yet: nothing hidden");
  const keep = new Uint8Array(d.nSpans).fill(1);
  keep[span(2)] = 0; // the query hides one group member
  const evKeep = new Uint8Array(d.nEvents).fill(1);
  evKeep[ev(0)] = 0;
  const rowKeep = new Uint8Array(d.nSamples).fill(1);
  rowKeep[d.spanSample[span(4)]] = 0; // and the remote sample's whole row
  noteMasks(d, { keep, evKeep, rowKeep, focus: null, evFocus: null });
  const hub = linksOf(d, "span", span(1)).map((l) => describe(l, end("span", span(1))).target);
  assert.deepEqual(hub.map((t) => filteredOut(d, t)).sort(), [false, true]);
  assert.equal(filteredOut(d, end("span", span(2))), true);
  assert.equal(filteredOut(d, end("event", ev(0))), true);
  assert.equal(filteredOut(d, end("event", ev(1))), false);
  assert.equal(filteredOut(d, end("span", span(4))), true, "its row is gone");
  assert.equal(filteredOut(d, end("event", ev(2))), true, "an event in a hidden row");
  noteMasks(d, { keep: null, evKeep: null, rowKeep: null, focus: null, evFocus: null });
  assert.equal(filteredOut(d, end("span", span(2))), false, "the filter lifted");
});
