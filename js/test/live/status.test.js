import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload, F_OPEN, F_ENGINE, CLIP_SHIFT } from "../../src/data/decode.js";
import { liveStatus, growingSpans, growTo } from "../../src/live/status.js";
import { keepHit } from "../../src/live/keep.js";
import { rowTag } from "../../src/live/marks.js";
import { lossLines, totalLost } from "../../src/live/banner.js";
import { sortRows } from "../../src/data/layout.js";
import { makePayload } from "../helpers/make_payload.js";

const OPEN_ROW_END = F_OPEN | (1 << CLIP_SHIFT);
const OPEN_SIBLING = F_OPEN | (2 << CLIP_SHIFT);

/** Finished samples of 10..19 s, one running for 30 s (a straggler), one quiet for 70 s. */
function rollout() {
  const samples = [];
  const spans = [];
  for (let s = 0; s < 10; s++) {
    samples.push({ start: 0, end: 10 + s, sample_index: s });
    spans.push({ sample: s, start: 0, end: 10 + s, name: "generate" });
  }
  samples.push({ start: 70, end: 98, sample_index: 10 }); // running 30 s at now=100, heard 2 s ago
  spans.push({ sample: 10, start: 70, end: 98, name: "sample", flags: OPEN_ROW_END, depth: 0 });
  spans.push({ sample: 10, start: 71, end: 98, name: "generate", flags: OPEN_ROW_END, lane: 1, depth: 1 });
  samples.push({ start: 20, end: 30, sample_index: 11 }); // last record at 30: quiet for 70 s at now=100
  spans.push({ sample: 11, start: 20, end: 30, name: "sample", flags: OPEN_ROW_END, depth: 0 });
  spans.push({ sample: 11, start: 22, end: 30, name: "tool_call", flags: OPEN_ROW_END, lane: 1, depth: 1 });
  spans.push({ sample: 11, start: 21, end: 22, name: "generate", lane: 1, depth: 1 });
  spans.push({ sample: 11, start: 25, end: 26, name: "engine_slice", flags: F_OPEN | F_ENGINE, lane: 2, depth: 2 });
  return decodePayload(makePayload({ samples, spans }).payload);
}

test("stragglers run longer than the finished samples' p90; stalled ones went quiet", () => {
  const data = rollout();
  const status = liveStatus(data, 100, 60);
  // finished durations 10..19: p90 by linear interpolation = 18.1
  assert.ok(Math.abs(status.p90 - 18.1) < 1e-9);
  assert.equal(status.nRunning, 2);
  assert.deepEqual([status.straggler[10], status.straggler[11]], [1, 1]);
  assert.deepEqual([status.stalled[10], status.stalled[11]], [0, 1]);
  assert.equal(status.runningFor[10], 30);
  assert.equal(status.quietFor[11], 70);
  // stuck in its deepest open span of its own (not the engine's)
  assert.equal(data.names[data.spanName[status.stuckSpan[11]]], "tool_call");
  assert.equal(data.names[data.spanName[status.stuckSpan[10]]], "generate");
  assert.equal(status.stuckSpan[0], -1);
  assert.match(rowTag(data, status, 11)?.text ?? "", /^stalled 1m 10\.0s in tool_call$/);
  assert.match(rowTag(data, status, 10)?.text ?? "", /^straggler/);
  assert.equal(rowTag(data, status, 3), null);
});

test("with a longer stall_after nothing is stalled, and with no finished sample no straggler", () => {
  const data = rollout();
  assert.equal(liveStatus(data, 100, 120).nStalled, 0);
  const running = decodePayload(makePayload({
    samples: [{ start: 0, end: 5 }],
    spans: [{ sample: 0, start: 0, end: 5, name: "sample", flags: OPEN_ROW_END }],
  }).payload);
  const status = liveStatus(running, 50, 60);
  assert.ok(Number.isNaN(status.p90));
  assert.equal(status.nStragglers, 0);
});

test("a sample whose open span was clipped by its ended ancestor has stopped: not running nor stalled", () => {
  const OPEN_ANCESTOR = F_OPEN | (3 << CLIP_SHIFT);
  const data = decodePayload(makePayload({
    samples: [{ start: 0, end: 10 }, { start: 0, end: 12 }],
    spans: [
      { sample: 0, start: 0, end: 10, name: "group", depth: 0 },
      { sample: 0, start: 1, end: 10, name: "sglang_generate", lane: 1, depth: 1, flags: OPEN_ANCESTOR },
      { sample: 1, start: 0, end: 12, name: "generate", depth: 0 },
    ],
  }).payload);
  assert.equal(data.smpOpen[0], 1);
  const status = liveStatus(data, 500, 60);
  assert.deepEqual([status.nRunning, status.nStalled, status.nStragglers], [0, 0, 0]);
  assert.equal(status.running[0], 0);
  assert.equal(status.stuckSpan[0], -1);
  assert.equal(status.runningFor[0], 10);
  assert.equal(rowTag(data, status, 0), null);
});

test("open spans drawn to their row's last record grow to now; clipped ones stay", () => {
  const data = decodePayload(makePayload({
    samples: [{ start: 0, end: 10 }],
    spans: [
      { sample: 0, start: 0, end: 10, name: "sample", flags: OPEN_ROW_END },
      { sample: 0, start: 1, end: 4, name: "a", lane: 1, depth: 1, flags: OPEN_SIBLING },
      { sample: 0, start: 4, end: 10, name: "b", lane: 1, depth: 1, flags: OPEN_ROW_END },
    ],
  }).payload);
  const growing = growingSpans(data);
  assert.deepEqual(Array.from(growing).map((i) => data.names[data.spanName[i]]).sort(), ["b", "sample"]);
  assert.equal(growTo(data, growing, 25), true);
  for (const i of growing) assert.equal(data.spanEnd[i], 25);
  const clipped = Array.from(data.spanName.keys()).find((i) => data.names[data.spanName[i]] === "a") ?? -1;
  assert.equal(data.spanEnd[clipped], 4);
  assert.equal(data.spanEndMax[data.laneSpanOff[data.laneBase[0] + 1 + 1] - 1], 25);
  assert.equal(data.globalEnd, 25);
  assert.equal(growTo(data, growing, 20), false, "the clock never runs back");
});

test("rows sort by how long they have been running", () => {
  const data = rollout();
  data.liveRunning = liveStatus(data, 100, 60).runningFor;
  const rows = sortRows(data, Uint32Array.from({ length: data.nSamples }, (_, i) => i), "running", true);
  assert.deepEqual(Array.from(rows.slice(0, 2)), [11, 10]); // 80 s, then 30 s
});

test("a selected span is found again after its block moved and grew", () => {
  const before = decodePayload(makePayload({
    samples: [{ start: 0, end: 5 }, { start: 0, end: 9 }],
    spans: [
      { sample: 0, start: 0, end: 5, name: "x" },
      { sample: 1, start: 0, end: 9, name: "sample", flags: OPEN_ROW_END },
      { sample: 1, start: 2, end: 9, name: "tool", lane: 1, depth: 1, flags: OPEN_ROW_END },
    ],
  }).payload);
  const after = decodePayload(makePayload({
    samples: [{ start: 0, end: 5 }, { start: 0, end: 12 }],
    spans: [
      { sample: 0, start: 0, end: 3, name: "new" },
      { sample: 0, start: 0, end: 5, name: "x" },
      { sample: 1, start: 0, end: 12, name: "sample", flags: OPEN_ROW_END },
      { sample: 1, start: 1, end: 2, name: "early", lane: 1, depth: 1 },
      { sample: 1, start: 2, end: 11, name: "tool", lane: 1, depth: 1 },
    ],
  }).payload);
  const tool = Array.from(before.spanName.keys()).find((i) => before.names[before.spanName[i]] === "tool") ?? -1;
  const kept = keepHit(before, after, { type: "span", row: 1, sample: 1, span: tool, t: 3 });
  assert.ok(kept && kept.type === "span");
  assert.equal(after.names[after.spanName[kept.span]], "tool");
  const gone = keepHit(after, before, { type: "span", row: 0, sample: 0, span: 0, t: 1 });
  assert.equal(gone, null);
});

test("losses are told per sender: dropped, missing, silent", () => {
  const senders = [
    { sender: "gpu-1:411", received: 900, lost: 7, dropped: 30, silent: false },
    { sender: "gpu-2:77", received: 50, lost: 0, dropped: 0, silent: true, quiet_s: 14 },
    { sender: "gpu-3:9", received: 5, lost: 0, dropped: 0, silent: true, closed: true },
    { sender: "gpu-4:1", received: 5 },
  ];
  const lines = lossLines(senders);
  assert.equal(lines.length, 2);
  assert.match(lines[0], /^gpu-1:411: 30 dropped at the sender, 7 missing in transit$/);
  assert.match(lines[1], /^gpu-2:77: silent for 14/);
  assert.equal(totalLost(senders), 37);
  assert.deepEqual(lossLines(/** @type {any} */ (null)), []);
  // A clock far off the collector's is said, though nothing was lost.
  const skewed = lossLines([{ sender: "gpu-5:3", received: 9, clock: "up to 2.0 min behind" }]);
  assert.deepEqual(skewed, ["gpu-5:3: clock up to 2.0 min behind the collector's (its samples' running times and stalls are off by that)"]);
});
