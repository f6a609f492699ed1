// The engine's spans apart from the sample's own (engine_lanes.js), lane labels
// (lane_labels.js), the band's phases, and what a collapsed row draws and picks.

import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload, F_ENGINE, F_VIRTUAL } from "../../src/data/decode.js";
import { bandPhases, PRIORITY, LANE_OWN, LANE_BAND, isRequestSpan, isHolderSpan, KV_SENDER_SPAN } from "../../src/data/engine_lanes.js";
import { laneLabel, engineRole } from "../../src/data/lane_labels.js";
import { buildLayout, barBox, bandBox } from "../../src/data/layout.js";
import { spanVisibility, eventVisibility } from "../../src/data/filters.js";
import { hitTest, spanBox, canvasY, xOf } from "../../src/render/hit.js";
import { engineTree } from "../helpers/engine_spans.js";
import { makePayload } from "../helpers/make_payload.js";

const PHASES = {
  queue: ["prefill_waiting", "decode_waiting"],
  prefill: ["prefill_forward"],
  decode: ["decode_loop", "decode_forward"],
  pd: ["prefill_bootstrap", "decode_bootstrap"],
};
/** The request span names' roles, as the kernel's payload gives them. */
const ROLES = { "sglang prefill request": "prefill", "sglang decode request": "decode" };
const ALL = { showOpen: true, showEvents: true, showUnmatched: true, attempt: -1, attemptMode: /** @type {"filter"} */ ("filter"), highlightName: -1 };

/** A generation with a tool call beside it, PD requests under it (prefill, decode), their slices. */
const SPANS = [
  { sample: 0, start: 0, end: 100, name: "generate_and_rm", lane: 0, depth: 0 },
  { sample: 0, start: 10, end: 60, name: "sglang_generate", lane: 1, depth: 1, parent: 0 },
  { sample: 0, start: 70, end: 90, name: "tool_call", lane: 1, depth: 1, parent: 0 },
  { sample: 0, start: 10, end: 30, name: "sglang_generate [P]", lane: 2, depth: 2, parent: 1, flags: F_VIRTUAL },
  { sample: 0, start: 11, end: 30, name: "sglang prefill request", lane: 3, depth: 2, parent: 1, flags: F_ENGINE },
  { sample: 0, start: 11, end: 59, name: "sglang decode request", lane: 4, depth: 2, parent: 1, flags: F_ENGINE },
  { sample: 0, start: 11, end: 20, name: "prefill_waiting", lane: 5, depth: 3, parent: 4, flags: F_ENGINE },
  { sample: 0, start: 20, end: 30, name: "prefill_forward", lane: 5, depth: 3, parent: 4, flags: F_ENGINE },
  { sample: 0, start: 11, end: 30, name: "decode_bootstrap", lane: 6, depth: 3, parent: 5, flags: F_ENGINE },
  { sample: 0, start: 30, end: 59, name: "decode_loop", lane: 6, depth: 3, parent: 5, flags: F_ENGINE },
  { sample: 0, start: 31, end: 40, name: "decode_forward", lane: 7, depth: 4, parent: 9, flags: F_ENGINE },
  { sample: 0, start: 41, end: 58, name: "odd_slice", lane: 6, depth: 3, parent: 5, flags: F_ENGINE },
];

function setup(expanded = false) {
  const { payload, spanNew, evNew } = makePayload({
    samples: [{}],
    spans: SPANS,
    events: [
      { sample: 0, ts: 50, name: "retract", lane: 6, parent: 9 },
      { sample: 0, ts: 75, name: "tool_result", lane: 1, parent: 2 },
    ],
    meta: { engine_phases: PHASES, engine_roles: ROLES },
  });
  const d = decodePayload(payload);
  const L = buildLayout(d, Uint32Array.from([0]), () => expanded, 20);
  const g = { width: 1000, height: 400, gutter: 200, plotX: 200, plotW: 800, axisH: 30, tracksH: 0, scrollTop: 0, t0: 0, t1: 100 };
  return { d, L, g, at: (/** @type {number} */ i) => spanNew[i], ev: (/** @type {number} */ i) => evNew[i] };
}

test("band phases in drawing order, the reverse of the priority: other first, prefill last; unknown phases after other", () => {
  assert.deepEqual(bandPhases(PHASES), ["other", "pd", "queue", "decode", "prefill"]);
  assert.deepEqual(bandPhases(PHASES), [...PRIORITY].reverse(), "vocabularies.json's engine_phase_priority, on top first");
  assert.deepEqual(bandPhases({ decode: [], custom: [], queue: [] }), ["other", "custom", "queue", "decode"]);
  assert.deepEqual(bandPhases({}), ["other"]);
});

test("each span's band phase: its slices' by name at any depth, none for requests", () => {
  const { d, at, ev } = setup();
  const phase = (/** @type {number} */ i) => (d.spanBand[at(i)] ? d.bandPhases[d.spanBand[at(i)] - 1] : null);
  assert.deepEqual(SPANS.map((_, i) => phase(i)), [null, null, null, null, null, null, "queue", "prefill", "pd", "decode", "decode", "other"]);
  assert.ok(d.hasEngine);
  assert.ok(isRequestSpan(d, at(4)) && !isRequestSpan(d, at(6)) && !isRequestSpan(d, at(1)));
  const mix = Array.from({ length: d.nLanes[0] }, (_, lane) => d.laneMix[d.laneBase[0] + lane]);
  assert.deepEqual(mix, [LANE_OWN, LANE_OWN, LANE_OWN, LANE_BAND, LANE_BAND, LANE_BAND, LANE_BAND, LANE_BAND]);
  assert.equal(d.evEngine[ev(0)], 1, "retract: the engine's");
  assert.equal(d.evEngine[ev(1)], 0, "tool_result: the sample's own");
});

test("a KV sender holds its slices: no phase of its own, Mooncake's by name", () => {
  const spans = engineTree(`
    sglang_generate                      0   100  lane 0
      sglang prefill request             10  40   lane 1
        prefill_forward                  10  30   lane 2
        ${KV_SENDER_SPAN}                10  38   lane 3
          mooncake_send                  30  30   lane 4
          mooncake_worker_send           30  35   lane 4
            mooncake_worker_send_session 31  33   lane 5
  `);
  const { payload, spanNew } = makePayload({
    samples: [{}], spans, meta: { engine_phases: { ...PHASES, pd: [...PHASES.pd, "mooncake_send", "mooncake_worker_send"] }, engine_roles: ROLES },
  });
  const d = decodePayload(payload);
  const phase = (/** @type {number} */ i) => (d.spanBand[spanNew[i]] ? d.bandPhases[d.spanBand[spanNew[i]] - 1] : null);
  assert.deepEqual(spans.map((_, i) => phase(i)), [null, null, "prefill", null, "pd", "pd", "other"]);
  assert.ok(isHolderSpan(d, spanNew[3]) && isHolderSpan(d, spanNew[1]) && !isHolderSpan(d, spanNew[2]));
  assert.ok(!isRequestSpan(d, spanNew[3]), "a sender is no request");
  const mix = Array.from({ length: d.nLanes[0] }, (_, lane) => d.laneMix[d.laneBase[0] + lane]);
  assert.deepEqual(mix, [LANE_OWN, LANE_BAND, LANE_BAND, LANE_BAND, LANE_BAND, LANE_BAND]);
});

test("a payload without engine spans: every drawn lane the sample's own, no band", () => {
  const d = decodePayload(makePayload({ samples: [{}], spans: SPANS.slice(0, 4) }).payload);
  assert.ok(!d.hasEngine);
  assert.equal(d.spanBand.reduce((sum, v) => sum + v, 0), 0);
  assert.ok(Array.from(d.laneMix).every((mix) => mix === LANE_OWN));
});

test("lane labels name every span they hold, with the engine's role", () => {
  const { d } = setup();
  const labels = Array.from({ length: d.nLanes[0] }, (_, lane) => laneLabel(d, d.laneBase[0] + lane).text);
  assert.deepEqual(labels, [
    "generate_and_rm",
    "sglang_generate, tool_call",
    "sglang_generate [P]",
    "sglang prefill request [P]",
    "sglang decode request [D]",
    "prefill_waiting, prefill_forward [P]",
    "decode_bootstrap, decode_loop, odd_slice [D]",
    "decode_forward [D]",
  ]);
  assert.equal(laneLabel(d, d.laneBase[0] + 6).role, "[D]");
  assert.equal(engineRole(d, 0), "", "not the engine's");
});

test("lane labels isolate a name holding bidirectional controls, so it reverses no other", () => {
  const spans = ["\u202egnp.exe", "tool_call"].map((name, i) => ({ sample: 0, start: i, end: i + 0.5, name, lane: 0, depth: 0 }));
  const d = decodePayload(makePayload({ samples: [{}], spans }).payload);
  assert.equal(laneLabel(d, 0).text, "\u2068\u202egnp.exe\u2069, tool_call");
});

test("lane labels: most frequent names first, the rest counted, mixed roles both", () => {
  const names = ["a", "b", "b", "c", "c", "c", "d", "e"];
  const spans = names.map((name, i) => ({ sample: 0, start: i, end: i + 0.5, name, lane: 0, depth: 0 }));
  const d = decodePayload(makePayload({ samples: [{}], spans }).payload);
  assert.equal(laneLabel(d, 0).text, "c, b, a, d +1");
  const both = decodePayload(makePayload({
    samples: [{}],
    spans: [
      { sample: 0, start: 0, end: 10, name: "prefill request", lane: 0, flags: F_ENGINE },
      { sample: 0, start: 0, end: 10, name: "decode request", lane: 1, flags: F_ENGINE },
      { sample: 0, start: 0, end: 5, name: "x", lane: 2, parent: 0, flags: F_ENGINE },
      { sample: 0, start: 5, end: 10, name: "x", lane: 2, parent: 1, flags: F_ENGINE },
    ],
    meta: { engine_roles: { "prefill request": "prefill", "decode request": "decode" } },
  }).payload);
  assert.equal(laneLabel(both, 2).text, "x [P+D]");
});

test("an engine span's role is the one the payload gives its request's name, not a word in it", () => {
  const spans = [
    { sample: 0, start: 0, end: 10, name: "half one", lane: 0, flags: F_ENGINE },
    { sample: 0, start: 0, end: 10, name: "prefill-looking request", lane: 1, flags: F_ENGINE },
    { sample: 0, start: 0, end: 10, name: "odd request", lane: 2, flags: F_ENGINE },
    { sample: 0, start: 0, end: 5, name: "x", lane: 3, parent: 0, flags: F_ENGINE },
  ];
  const roles = { "half one": "decode", "odd request": "tokenize" };
  const d = decodePayload(makePayload({ samples: [{}], spans, meta: { engine_roles: roles } }).payload);
  assert.deepEqual([0, 1, 2, 3].map((lane) => laneLabel(d, lane).role), ["[D]", "", "", "[D]"]);
  assert.deepEqual(Object.keys(d.meta.engine_roles), ["half one"], "a role the contract does not know is dropped");
});

test("a collapsed row picks the sample's own span where engine slices lie under it", () => {
  const { d, L, g, at } = setup(false);
  const vis = spanVisibility(d, ALL);
  const evVis = eventVisibility(d, ALL);
  const box = barBox(L, 0, 0);
  const y = canvasY(g, box.y + box.h / 2);
  // decode_loop (depth 3) and decode_forward (depth 4) lie at t=35: the generation (depth 1) is picked
  const hit = hitTest(d, L, g, vis, evVis, xOf(g, 35), y);
  assert.equal(hit && hit.type === "span" ? hit.span : -1, at(1));
  // the band under the bar is no target; the row is
  const band = bandBox(L, 0);
  const below = hitTest(d, L, g, vis, evVis, xOf(g, 35), canvasY(g, band.y + band.h / 2));
  assert.equal(below && below.type, "row");
  // the engine's retract event is not a marker of the collapsed row
  const atRetract = hitTest(d, L, g, vis, evVis, xOf(g, 50), y);
  assert.notEqual(atRetract && atRetract.type, "event");
  // expanded, the same point of the slices' lane picks the slice
  const ex = setup(true);
  const lane = barBox(ex.L, 0, 6);
  const pick = hitTest(ex.d, ex.L, ex.g, vis, evVis, xOf(ex.g, 35), canvasY(ex.g, lane.y + lane.h / 2));
  assert.equal(pick && pick.type === "span" ? pick.span : -1, ex.at(9));
});

test("in a collapsed row an engine span's box is the band over its time, nested or not", () => {
  const { d, L, g, at } = setup(false);
  const band = bandBox(L, 0);
  const bar = barBox(L, 0, 0);
  assert.ok(band.y >= bar.y + bar.h, "the band lies under the bar");
  assert.ok(band.y + band.h <= L.rowTop[1], "within the row");
  assert.ok(band.h >= 2 && band.h <= 3);
  const slice = spanBox(d, L, g, at(9));
  assert.ok(slice && slice.y === canvasY(g, band.y) && slice.h === band.h);
  for (const span of [at(10), at(4)]) assert.equal(spanBox(d, L, g, span)?.y, canvasY(g, band.y), "a nested slice, a request");
  assert.equal(spanBox(d, L, g, at(1))?.y, canvasY(g, bar.y));
});
