import { test } from "node:test";
import assert from "node:assert/strict";
import { firstReaching, lowerBound, mergeLane, RunBuffer, clusterSorted, ClusterBuffer, EventScratch, gatherEvents } from "../../src/render/lod.js";
import { rng } from "../helpers/make_payload.js";

/** Random lane: sorted starts, arbitrary durations, running max of ends. */
function lane(n, seed, span = 1000) {
  const r = rng(seed);
  const start = new Float32Array(n);
  const end = new Float32Array(n);
  let t = 0;
  for (let i = 0; i < n; i++) {
    t += r() * (span / n) * 2;
    start[i] = t;
    end[i] = t + (r() < 0.05 ? r() * span * 0.3 : r() * (span / n) * 3);
  }
  const endMax = new Float32Array(n);
  let m = -Infinity;
  for (let i = 0; i < n; i++) {
    m = Math.max(m, end[i]);
    endMax[i] = m;
  }
  return { start, end, endMax };
}

test("firstReaching: visible spans found by binary search equal brute force", () => {
  for (let seed = 1; seed <= 30; seed++) {
    const { start, end, endMax } = lane(500, seed);
    const r = rng(seed * 7);
    for (let q = 0; q < 40; q++) {
      const t0 = r() * 1100 - 50;
      const t1 = t0 + r() * 200;
      const brute = [];
      for (let i = 0; i < start.length; i++) if (end[i] >= t0 && start[i] <= t1) brute.push(i);
      const got = [];
      for (let i = firstReaching(endMax, 0, start.length, t0); i < start.length && start[i] <= t1; i++) if (end[i] >= t0) got.push(i);
      assert.deepEqual(got, brute);
    }
  }
});

test("firstReaching and lowerBound respect sub-ranges", () => {
  const a = new Float32Array([1, 2, 2, 5, 9]);
  assert.equal(firstReaching(a, 0, 5, 2), 1);
  assert.equal(firstReaching(a, 2, 5, 0), 2);
  assert.equal(firstReaching(a, 0, 5, 10), 5);
  assert.equal(lowerBound(a, 0, 5, 3), 3);
  assert.equal(lowerBound(a, 0, 3, 100), 3);
});

test("mergeLane: every visible span is counted once; wide spans stay alone", () => {
  for (let seed = 1; seed <= 20; seed++) {
    const { start, end, endMax } = lane(3000, seed);
    const sc = { t0: 100, t1: 700, pxPerSec: 1.3 * seed, x0: 50 };
    const out = new RunBuffer(8);
    mergeLane(start, end, endMax, null, 0, start.length, sc, out);
    let visible = 0;
    for (let i = 0; i < start.length; i++) if (end[i] >= sc.t0 && start[i] <= sc.t1) visible++;
    let counted = 0;
    for (let k = 0; k < out.n; k++) {
      counted += out.count[k];
      assert.ok(out.x1[k] - out.x0[k] >= 1 - 1e-3, "runs are at least a pixel wide");
      if (out.count[k] > 1) {
        // Representative is the longest merged span.
        const rep = out.span[k];
        assert.ok(rep >= 0);
      }
    }
    assert.equal(counted, visible, `seed ${seed}`);
  }
});

test("mergeLane merges sub-pixel neighbours and keeps the longest as representative", () => {
  // 10 spans of 0.1 s every 0.2 s at 1 px/s: all within 2 px -> one run.
  const n = 10;
  const start = new Float32Array(n);
  const end = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    start[i] = i * 0.2;
    end[i] = start[i] + (i === 6 ? 0.15 : 0.1);
  }
  const endMax = Float32Array.from(end);
  const out = new RunBuffer();
  mergeLane(start, end, endMax, null, 0, n, { t0: 0, t1: 10, pxPerSec: 1, x0: 0 }, out);
  assert.equal(out.n, 1);
  assert.equal(out.count[0], 10);
  assert.equal(out.span[0], 6);
  // Zoomed in: every span is wide enough to be alone.
  out.reset();
  mergeLane(start, end, endMax, null, 0, n, { t0: 0, t1: 10, pxPerSec: 100, x0: 0 }, out);
  assert.equal(out.n, 10);
  // Hidden spans are skipped.
  const vis = new Uint8Array(n).fill(1);
  vis[3] = 0;
  out.reset();
  mergeLane(start, end, endMax, vis, 0, n, { t0: 0, t1: 10, pxPerSec: 100, x0: 0 }, out);
  assert.equal(out.n, 9);
});

test("mergeLane separates runs with a gap of more than a pixel", () => {
  const start = new Float32Array([0, 0.1, 5, 5.1]);
  const end = new Float32Array([0.05, 0.15, 5.05, 5.15]);
  const out = new RunBuffer();
  mergeLane(start, end, Float32Array.from([0.05, 0.15, 5.05, 5.15]), null, 0, 4, { t0: 0, t1: 10, pxPerSec: 1, x0: 0 }, out);
  assert.equal(out.n, 2);
  assert.deepEqual(Array.from(out.count.subarray(0, 2)), [2, 2]);
});

test("event clustering within a few px", () => {
  const xs = [0, 1, 2, 3, 10, 10.5, 30, 100, 104, 108, 112];
  const ids = xs.map((_, i) => i);
  const out = new ClusterBuffer(2);
  clusterSorted(xs, ids, xs.length, 5, out);
  assert.deepEqual(Array.from(out.count.subarray(0, out.n)), [4, 2, 1, 2, 2]);
  assert.deepEqual(Array.from(out.first.subarray(0, out.n)), [0, 4, 6, 7, 9]);
  assert.equal(out.x[0], 1.5);
  // Brute-force invariants: every id in exactly one cluster, clusters <= gap wide.
  const r = rng(3);
  const rand = Array.from({ length: 500 }, () => r() * 1000).sort((a, b) => a - b);
  const o2 = new ClusterBuffer();
  clusterSorted(rand, rand.map((_, i) => i), rand.length, 4, o2);
  let total = 0;
  for (let c = 0; c < o2.n; c++) {
    const first = o2.first[c];
    const last = first + o2.count[c] - 1;
    assert.ok(rand[last] - rand[first] <= 4);
    if (c + 1 < o2.n) assert.ok(rand[last + 1] - rand[first] > 4);
    total += o2.count[c];
  }
  assert.equal(total, rand.length);
});

test("gatherEvents + scratch sort merges lanes by x", () => {
  const ts = new Float32Array([1, 2, 3, 1.5, 2.5]);
  const sc = { t0: 0, t1: 10, pxPerSec: 10, x0: 0 };
  const s = new EventScratch(1);
  gatherEvents(ts, 0, 3, sc, 0, () => true, s);
  gatherEvents(ts, 3, 5, sc, 0, (i) => i !== 4, s);
  s.sort();
  assert.deepEqual(Array.from(s.ids.subarray(0, s.n)), [0, 3, 1, 2]);
  assert.deepEqual(Array.from(s.xs.subarray(0, s.n)), [10, 15, 20, 30]);
});
