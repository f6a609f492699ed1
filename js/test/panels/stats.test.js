import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload, F_VIRTUAL } from "../../src/data/decode.js";
import { spanVisibility, eventVisibility, HIDDEN, SHOWN, DIMMED } from "../../src/data/filters.js";
import { cursorCounts, brushSummary, percentile } from "../../src/panels/stats.js";
import { makePayload, rng } from "../helpers/make_payload.js";

const ALL = { showOpen: true, showEvents: true, showUnmatched: true, attempt: -1, attemptMode: /** @type {"filter"|"highlight"} */ ("filter"), highlightName: -1 };

function randomData(seed, nSamples = 40) {
  const r = rng(seed);
  const samples = [];
  const spans = [];
  const names = ["sglang_generate", "tool_call", "tool_execution", "reward_model"];
  for (let s = 0; s < nSamples; s++) {
    samples.push({});
    const t0 = r() * 100;
    const dur = 10 + r() * 200;
    spans.push({ sample: s, start: t0, end: t0 + dur, name: "generate_and_rm", lane: 0, depth: 0, attempt: 0 });
    let t = t0;
    const lanes = 1 + Math.floor(r() * 3);
    for (let k = 0; k < 30; k++) {
      const d = r() * 8;
      const lane = 1 + Math.floor(r() * lanes);
      const flags = r() < 0.05 ? 1 : r() < 0.05 ? F_VIRTUAL : 0;
      spans.push({ sample: s, start: t, end: t + d, name: names[Math.floor(r() * names.length)], lane, depth: lane, attempt: r() < 0.2 ? 1 : 0, flags });
      t += d * r() * 1.5;
    }
  }
  const { payload } = makePayload({ samples, spans });
  return decodePayload(payload);
}

test("percentile: nearest rank vs brute force", () => {
  const r = rng(5);
  for (let n = 1; n < 60; n++) {
    const a = Float64Array.from({ length: n }, () => Math.floor(r() * 100)).sort();
    for (const q of [0.5, 0.9, 0.95, 1]) {
      // brute force: smallest value with at least q*n values <= it
      let want = NaN;
      for (const v of a) {
        const atMost = a.filter((x) => x <= v).length;
        if (atMost >= q * n - 1e-9) {
          want = v;
          break;
        }
      }
      assert.equal(percentile(a, q), want, `n ${n} q ${q}`);
    }
  }
  assert.ok(Number.isNaN(percentile([], 0.95)));
});

test("cursor counts vs brute force", () => {
  for (let seed = 1; seed <= 5; seed++) {
    const d = randomData(seed);
    const vis = spanVisibility(d, ALL);
    const rows = Uint32Array.from({ length: d.nSamples }, (_, i) => i).filter((s) => s % 3 !== 1);
    for (const t of [-5, 0, 33.3, 80, 150, 400]) {
      const c = cursorCounts(d, rows, vis, t);
      let ns = 0, run = 0, end = 0;
      const per = new Map();
      for (const s of rows) {
        const a = d.smpStart[s], b = d.smpEnd[s];
        if (t < a) ns++;
        else if (t > b) end++;
        else run++;
        for (let i = d.spanOff[s]; i < d.spanOff[s + 1]; i++) {
          if (vis[i] && !(d.spanFlags[i] & F_VIRTUAL) && d.spanStart[i] <= t && d.spanEnd[i] >= t && a <= t && t <= b) per.set(d.spanName[i], (per.get(d.spanName[i]) || 0) + 1);
        }
      }
      assert.equal(c.notStarted, ns);
      assert.equal(c.running, run);
      assert.equal(c.ended, end);
      assert.equal(c.notStarted + c.running + c.ended + c.untraced, rows.length);
      const got = new Map(c.active.map((x) => [x.name, x.count]));
      assert.deepEqual(got, per);
      for (let k = 1; k < c.active.length; k++) assert.ok(c.active[k - 1].count >= c.active[k].count);
    }
  }
});

test("brush summary: count, clipped total, mean, p95 vs brute force", () => {
  for (let seed = 1; seed <= 5; seed++) {
    const d = randomData(seed + 10);
    const vis = spanVisibility(d, { ...ALL, attempt: 0 });
    const rows = Uint32Array.from({ length: d.nSamples }, (_, i) => i);
    for (const [a, b] of [[20, 60], [0, 1000], [55.5, 55.6], [90, 30]]) {
      const sum = brushSummary(d, rows, vis, a, b);
      const lo = Math.min(a, b), hi = Math.max(a, b);
      const per = new Map();
      for (const s of rows) {
        for (let i = d.spanOff[s]; i < d.spanOff[s + 1]; i++) {
          if (!vis[i] || d.spanFlags[i] & F_VIRTUAL) continue;
          const st = d.spanStart[i], en = d.spanEnd[i];
          if (en < lo || st > hi) continue;
          const e = per.get(d.spanName[i]) || { count: 0, total: 0, durs: [] };
          e.count++;
          e.total += Math.min(en, hi) - Math.max(st, lo);
          e.durs.push(en - st);
          per.set(d.spanName[i], e);
        }
      }
      assert.equal(sum.entries.length, per.size);
      for (const e of sum.entries) {
        const want = per.get(e.name);
        assert.equal(e.count, want.count);
        assert.ok(Math.abs(e.total - want.total) < 1e-6 * Math.max(1, want.total));
        const sorted = want.durs.slice().sort((x, y) => x - y);
        const mean = sorted.reduce((x, y) => x + y, 0) / sorted.length;
        assert.ok(Math.abs(e.mean - mean) < 1e-6 * Math.max(1, mean));
        assert.equal(e.p95, sorted[Math.ceil(0.95 * sorted.length) - 1]);
      }
    }
  }
});

test("visibility masks: toggles, attempt filter / highlight, legend highlight", () => {
  const { payload } = makePayload({
    samples: [{}],
    spans: [
      { sample: 0, start: 0, end: 1, name: "a", attempt: 0 },
      { sample: 0, start: 1, end: 2, name: "b", attempt: 1 },
      { sample: 0, start: 2, end: 3, name: "a", attempt: 1, flags: 1 },
      { sample: 0, start: 3, end: 4, name: "c", attempt: 1, flags: 8 },
    ],
    events: [
      { sample: 0, ts: 1, name: "e", attempt: 0 },
      { sample: 0, ts: 2, name: "u", attempt: 1, kind: 1 },
    ],
  });
  const d = decodePayload(payload);
  assert.deepEqual(Array.from(spanVisibility(d, ALL)), [SHOWN, SHOWN, SHOWN, HIDDEN]);
  assert.deepEqual(Array.from(spanVisibility(d, { ...ALL, showOpen: false })), [SHOWN, SHOWN, HIDDEN, HIDDEN]);
  assert.deepEqual(Array.from(spanVisibility(d, { ...ALL, attempt: 1 })), [HIDDEN, SHOWN, SHOWN, HIDDEN]);
  assert.deepEqual(Array.from(spanVisibility(d, { ...ALL, attempt: 1, attemptMode: "highlight" })), [DIMMED, SHOWN, SHOWN, HIDDEN]);
  assert.deepEqual(Array.from(spanVisibility(d, { ...ALL, highlightName: d.names.indexOf("a") })), [SHOWN, DIMMED, SHOWN, HIDDEN]);
  assert.deepEqual(Array.from(eventVisibility(d, ALL)), [SHOWN, SHOWN]);
  assert.deepEqual(Array.from(eventVisibility(d, { ...ALL, showEvents: false })), [HIDDEN, SHOWN]);
  assert.deepEqual(Array.from(eventVisibility(d, { ...ALL, showUnmatched: false })), [SHOWN, HIDDEN]);
  assert.deepEqual(Array.from(eventVisibility(d, { ...ALL, attempt: 0 })), [SHOWN, HIDDEN]);
});
