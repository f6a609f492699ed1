// The widget's rollout diff equals Python's analysis.rollout_diff on the same
// hand-built rollouts (tests/answers/test_rollout_diff.py writes the fixture and
// fails when it is stale), and the percentile rule is pandas' linear one.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { decodePayload, F_PD_DETAIL } from "../../src/data/decode.js";
import { rolloutDiff, rolloutSide, diffPair } from "../../src/data/diff.js";
import { quantile } from "../../src/data/quantile.js";
import { diffScopeText } from "../../src/panels/diff_panel.js";
import { makePayload } from "../helpers/make_payload.js";

const fixture = JSON.parse(readFileSync(new URL("../fixtures/rollout_diff.json", import.meta.url), "utf8"));

/** @param {import("../../src/data/diff.js").DiffRow} r */
function asPython(r) {
  /** @param {number} v */
  const v = (x) => (Number.isNaN(x) ? null : x);
  const side = (/** @type {any} */ s, /** @type {string} */ k) => (s ? { [`count_${k}`]: s.count, [`p50_${k}`]: v(s.p50), [`p95_${k}`]: v(s.p95), [`total_${k}`]: s.total, [`open_${k}`]: s.open } : { [`count_${k}`]: null, [`p50_${k}`]: null, [`p95_${k}`]: null, [`total_${k}`]: null, [`open_${k}`]: null });
  return { name: r.label, ...side(r.a, "a"), ...side(r.b, "b"), count_diff: r.countDiff, p50_diff: v(r.p50Diff), p95_diff: v(r.p95Diff), total_diff: r.totalDiff, p50_ratio: v(r.p50Ratio) };
}

test("quantile interpolates linearly, as pandas does", () => {
  assert.equal(quantile([1, 2], 0.5), 1.5);
  assert.ok(Math.abs(quantile([1, 2], 0.95) - 1.95) < 1e-12);
  assert.equal(quantile([3], 0.95), 3);
  assert.ok(Number.isNaN(quantile([], 0.5)));
  assert.equal(quantile([0, 10, 20, 30], 0.5), 15);
});

test("the JS table equals analysis.rollout_diff on the fixture", () => {
  const d = decodePayload(fixture.payload);
  const [a, b] = diffPair(d, null);
  assert.deepEqual([a, b], fixture.pair);
  const got = rolloutDiff(d, a, b).map(asPython);
  const want = fixture.expected;
  assert.deepEqual(got.map((r) => r.name), want.map((/** @type {any} */ r) => r.name), "same names, same order");
  for (let i = 0; i < want.length; i++) {
    for (const [k, w] of Object.entries(want[i])) {
      const g = /** @type {any} */ (got[i])[k];
      if (w === null || typeof w === "string") assert.equal(g, w, `${want[i].name}.${k}`);
      else assert.ok(Math.abs(g - w) <= 1e-6 * Math.max(1, Math.abs(w)), `${want[i].name}.${k}: ${g} vs ${w}`);
    }
  }
  assert.equal(got[0].name, "tool", "the regressed name first");
});

test("the slowest instance of a name in each rollout", () => {
  const d = decodePayload(fixture.payload);
  const tool = d.names.indexOf("tool");
  for (const [r, dur] of [[0, 2], [1, 7]]) {
    const i = /** @type {any} */ (rolloutSide(d, r).get(tool)).slowest;
    assert.equal(d.spanName[i], tool);
    assert.equal(d.smpRollout[d.spanSample[i]], r);
    assert.ok(Math.abs(d.spanEnd[i] - d.spanStart[i] - dur) < 1e-6);
  }
  const log = /** @type {any} */ (rolloutSide(d, 0).get(d.names.indexOf("log")));
  assert.equal(log.count, 0);
  assert.ok(log.slowest >= 0, "only open spans: the longest open one");
});

test("PD-detail spans from other producers are skipped; the pair falls back to the first two", () => {
  const d = decodePayload(fixture.payload);
  const tool = d.names.indexOf("tool");
  const before = /** @type {any} */ (rolloutSide(d, 1).get(tool)).count;
  const i = Array.from(d.spanName).findIndex((n, k) => n === tool && d.smpRollout[d.spanSample[k]] === 1);
  d.spanFlags[i] |= F_PD_DETAIL;
  assert.equal(/** @type {any} */ (rolloutSide(d, 1).get(tool)).count, before - 1);
  assert.deepEqual(diffPair(d, [1, 0]), [1, 0]);
  assert.deepEqual(diffPair(d, [1, 1]), [0, 1]);
  assert.deepEqual(diffPair(d, [0, 5]), [0, 1]);
});

test("the widget's table covers what the filter leaves: shown samples, spans the query keeps", () => {
  const d = decodePayload(fixture.payload);
  const tool = d.names.indexOf("tool");
  const full = rolloutDiff(d, 0, 1);
  assert.deepEqual(rolloutDiff(d, 0, 1, { rows: null, keep: null }), full, "no scope: everything, as Python");
  const slowB = /** @type {any} */ (full.find((r) => r.name === tool)?.b).slowest;
  // The query hides B's slowest tool span: it neither counts nor can be picked.
  const keep = new Uint8Array(d.nSpans).fill(1);
  keep[slowB] = 0;
  const narrowed = /** @type {any} */ (rolloutDiff(d, 0, 1, { rows: null, keep }).find((r) => r.name === tool));
  const wholeB = /** @type {any} */ (full.find((r) => r.name === tool)?.b);
  assert.equal(narrowed.b.count, wholeB.count - 1);
  assert.notEqual(narrowed.b.slowest, slowB);
  assert.equal(keep[narrowed.b.slowest], 1);
  assert.ok(narrowed.b.total < wholeB.total);
  // Only the shown rows count: without rollout B's samples, B has nothing.
  const rows = Array.from({ length: d.nSamples }, (_, s) => s).filter((s) => d.smpRollout[s] === 0);
  const onlyA = rolloutDiff(d, 0, 1, { rows, keep: null });
  assert.ok(onlyA.length > 0 && onlyA.every((r) => r.b === null && r.a !== null));
  assert.match(diffScopeText(d, { rows, keep: null }), new RegExp(`over the ${rows.length} of ${d.nSamples} samples the filter leaves$`));
  assert.match(diffScopeText(d, { rows: null, keep: null }), /over all \d+ samples/);
  assert.match(diffScopeText(d, { rows, keep }), /counting only the spans it matches/);
});

test("rows of equal total differences follow their names' code points, as Python sorts them", () => {
  const names = ["z", "\uff01", "\u{1F600}", ""];
  const spans = [0, 1].flatMap((sample) => names.map((name, i) => ({ sample, start: i, end: i + 1, name, lane: i })));
  const built = makePayload({ samples: [{ rollout: 0 }, { rollout: 1 }], spans, meta: { rollouts: ["rollout 0", "rollout 1"] } });
  const d = decodePayload(built.payload);
  assert.deepEqual(rolloutDiff(d, 0, 1).map((row) => d.names[row.name]), ["", "z", "\uff01", "\u{1F600}"]);
});
