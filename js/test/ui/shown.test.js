// The shown trace's update path: visibility, then rows, then layout, each
// from the settings and the views' masks, as a new payload or a live append
// drives it.

import { test } from "node:test";
import assert from "node:assert/strict";
import { ShownTrace } from "../../src/ui/shown.js";
import { defaultSettings } from "../../src/ui/viewstate.js";
import { makePayload } from "../helpers/make_payload.js";

function payload() {
  const samples = [
    { sample_index: 0, source: "math", status: "completed", reward: 1, label: "a", trace_id: "t0" },
    { sample_index: 1, source: "math", status: "completed", reward: 0, label: "b", trace_id: "t1" },
    { sample_index: 2, source: "code", status: "failed", reward: NaN, label: "c", trace_id: "t2" },
  ];
  const spans = [
    { sample: 0, start: 5, end: 20, name: "gen", lane: 0 },
    { sample: 0, start: 6, end: 7, name: "tool", lane: 1 },
    { sample: 1, start: 1, end: 30, name: "gen", lane: 0 },
    { sample: 2, start: 3, end: 4, name: "gen", lane: 0 },
  ];
  return makePayload({ samples, spans }).payload;
}

/** @param {ShownTrace} shown */
function refresh(shown, settings = defaultSettings()) {
  shown.updateVisibility(settings, -1);
  shown.updateRows(settings);
  shown.updateLayout(settings.laneH, () => false);
}

test("rows follow the sort and the rows' mask; the layout has a row each", () => {
  const shown = new ShownTrace(payload(), 18);
  const settings = { ...defaultSettings(), sort: /** @type {const} */ ("start") };
  refresh(shown, settings);
  assert.deepEqual(Array.from(shown.rows), [1, 2, 0]);
  assert.equal(shown.layout.rowTop.length, 4);
  assert.equal(shown.patchMasks({ rowKeep: Uint8Array.from([1, 0, 1]) }), true);
  refresh(shown, settings);
  assert.deepEqual(Array.from(shown.rows), [2, 0]);
  assert.equal(shown.patchMasks({ focus: null }), false, "a focus mask keeps the rows");
});

test("a span mask hides spans from the visibility; a new payload drops the masks", () => {
  const shown = new ShownTrace(payload(), 18);
  shown.patchMasks({ keep: Uint8Array.from([1, 0, 1, 1]) });
  refresh(shown);
  assert.deepEqual(Array.from(shown.vis), [1, 0, 1, 1]);
  shown.replace(payload());
  assert.equal(shown.masks.keep, null);
  refresh(shown);
  assert.deepEqual(Array.from(shown.vis), [1, 1, 1, 1]);
});

test("counts at a time split the rows into not started, running and ended", () => {
  const shown = new ShownTrace(payload(), 18);
  refresh(shown);
  const counts = shown.countsAt(10);
  assert.deepEqual([counts.notStarted, counts.running, counts.ended], [0, 2, 1]);
});
