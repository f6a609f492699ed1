import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload } from "../../src/data/decode.js";
import { allSamples, sortRows, buildLayout, visibleRows, rowAtY, barBox, laneAtY, rowHeight, ROW_PAD, laneGap } from "../../src/data/layout.js";
import { makePayload } from "../helpers/make_payload.js";

function data() {
  const samples = [
    { sample_index: 10, source: "math", status: "completed", reward: 1, label: "Paris", trace_id: "aaa111" },
    { sample_index: 11, source: "deepsearch_with_tool", status: "failed", reward: NaN, label: null, trace_id: "bbb222" },
    { sample_index: 12, source: "math", status: "truncated", reward: 0.25, label: "<img src=x onerror=alert(1)>", trace_id: "ccc333" },
    { sample_index: 113, source: "code", status: "completed", reward: 0.5, label: "Berlin", trace_id: "ddd444" },
  ];
  const spans = [
    { sample: 0, start: 5, end: 20, name: "a", lane: 0 },
    { sample: 0, start: 6, end: 7, name: "b", lane: 1 },
    { sample: 0, start: 8, end: 9, name: "c", lane: 2, flags: 1 },
    { sample: 1, start: 1, end: 30, name: "a", lane: 0 },
    { sample: 2, start: 3, end: 4, name: "a", lane: 0 },
    { sample: 2, start: 3, end: 4, name: "b", lane: 1 },
    { sample: 3, start: 3, end: 13, name: "a", lane: 0, flags: 1 },
    { sample: 3, start: 4, end: 5, name: "c", lane: 0, flags: 1 },
  ];
  return decodePayload(makePayload({ samples, spans }).payload);
}

test("every sample is a row before the query and the sort", () => {
  assert.deepEqual(Array.from(allSamples(data())), [0, 1, 2, 3]);
});

test("sort keys and direction; NaN last both ways; stable ties", () => {
  const d = data();
  const all = allSamples(d);
  assert.deepEqual(Array.from(sortRows(d, all, "start", false)), [1, 2, 3, 0]);
  assert.deepEqual(Array.from(sortRows(d, all, "start", true)), [0, 2, 3, 1]);
  assert.deepEqual(Array.from(sortRows(d, all, "duration", true)), [1, 0, 3, 2]);
  assert.deepEqual(Array.from(sortRows(d, all, "reward", false)), [2, 3, 0, 1]);
  assert.deepEqual(Array.from(sortRows(d, all, "reward", true)), [0, 3, 2, 1]);
  assert.deepEqual(Array.from(sortRows(d, all, "lanes", true)), [0, 2, 1, 3]);
  assert.deepEqual(Array.from(sortRows(d, all, "open", true)), [3, 0, 1, 2]);
  assert.deepEqual(Array.from(sortRows(d, all, "open", false)), [1, 2, 0, 3]);
});

test("expanded lane math and row positions", () => {
  const d = data();
  const rows = Uint32Array.from([0, 1, 2, 3]);
  const laneH = 16;
  const L = buildLayout(d, rows, (s) => s === 0 || s === 1, laneH);
  // sample 1 has one lane: "expanded" has no effect.
  assert.deepEqual(Array.from(L.expanded), [1, 0, 0, 0]);
  const h0 = 3 * laneH + 2 * ROW_PAD;
  const h1 = laneH + 2 * ROW_PAD;
  assert.equal(rowHeight(d, 0, true, laneH), h0);
  assert.deepEqual(Array.from(L.rowTop), [0, h0, h0 + h1, h0 + 2 * h1, h0 + 3 * h1]);
  assert.equal(L.totalHeight, h0 + 3 * h1);
  assert.deepEqual(barBox(L, 0, 2), { y: ROW_PAD + 2 * laneH, h: laneH - laneGap(laneH) });
  assert.deepEqual(barBox(L, 1, 0), { y: h0 + ROW_PAD, h: laneH - laneGap(laneH) });
  assert.equal(laneAtY(d, L, 0, ROW_PAD + laneH * 1.5), 1);
  assert.equal(laneAtY(d, L, 0, 1000), 2);
  assert.equal(laneAtY(d, L, 1, h0 + 5), 0);
  assert.equal(L.rowOfSample[2], 2);
});

test("visible rows from scrollTop (binary search) match a linear scan", () => {
  const d = data();
  const rows = Uint32Array.from([0, 1, 2, 3, 0, 1, 2, 3].slice(0, 4));
  const L = buildLayout(d, rows, (s) => s === 0, 12);
  for (let top = -10; top < L.totalHeight + 10; top += 3) {
    for (const h of [1, 10, 25, 200]) {
      const want = [];
      for (let r = 0; r < rows.length; r++) if (L.rowTop[r + 1] > top && L.rowTop[r] < top + h) want.push(r);
      const [a, b] = visibleRows(L, top, h);
      const got = [];
      for (let r = a; r < b; r++) got.push(r);
      assert.deepEqual(got, want, `top ${top} h ${h}`);
    }
  }
  assert.equal(rowAtY(L, -1), -1);
  assert.equal(rowAtY(L, L.totalHeight), -1);
  assert.equal(rowAtY(L, 0), 0);
  assert.equal(rowAtY(L, L.rowTop[2]), 2);
  assert.equal(rowAtY(L, L.rowTop[2] - 0.01), 1);
});

test("comparison view keeps rows grouped by rollout, sorted within each group", () => {
  const samples = [
    { sample_index: 0, rollout: 1, start: 1, end: 9 },
    { sample_index: 1, rollout: 0, start: 2, end: 3 },
    { sample_index: 2, rollout: 1, start: 0, end: 2 },
    { sample_index: 3, rollout: 0, start: 0, end: 8 },
  ];
  const spans = samples.map((s, i) => ({ sample: i, start: s.start, end: s.end, name: "a" }));
  const meta = { rollouts: ["rollout 12", "rollout 13"], align: "rollout" };
  const d = decodePayload(makePayload({ samples, spans, meta }).payload);
  const all = allSamples(d);
  assert.deepEqual(Array.from(sortRows(d, all, "start", false)), [3, 1, 2, 0]);
  assert.deepEqual(Array.from(sortRows(d, all, "duration", true)), [3, 1, 0, 2]);
  const global = decodePayload(makePayload({ samples, spans, meta: { ...meta, align: "global" } }).payload);
  assert.deepEqual(Array.from(sortRows(global, all, "start", false)), [2, 3, 0, 1]);
});
