// Rollout diff statistics (pure): per span name, rollout B against rollout A
// over the payload's spans. Python's `analysis.rollout_diff` builds the same
// table (tests/answers/test_rollout_diff.py writes a fixture js/test/data/diff.test.js
// compares against): closed spans give count, p50, p95 (linear interpolation,
// as pandas' quantile) and total; open spans are only counted (`open`). Spans
// flagged PD-detail are skipped, so a PD phase counts once, as its [P]/[D] span.
// The widget narrows it to what the filter box leaves (`DiffScope`): the
// shown samples and the spans the query does not hide; Python's table is the
// unfiltered one (no scope).

import { F_OPEN, F_PD_DETAIL, nameOf } from "./decode.js";
import { quantile } from "./quantile.js";

/** @typedef {import("./decode.js").Data} Data */

/**
 * One rollout's numbers for one name.
 * @typedef {Object} DiffSide
 * @property {number} count closed spans
 * @property {number} p50 NaN without closed spans
 * @property {number} p95
 * @property {number} total seconds, summed over the closed spans
 * @property {number} open open spans
 * @property {number} slowest payload index of the longest closed span (the longest open one when none closed)
 */

/**
 * One row of the table; `a` / `b` null when the name is absent from that rollout.
 * Count and total differences count an absent side as zero; the p50/p95 ones
 * and `p50Ratio` (which also needs a positive A p50) are NaN then.
 * @typedef {Object} DiffRow
 * @property {number} name index in the name table
 * @property {string} label the name
 * @property {DiffSide|null} a
 * @property {DiffSide|null} b
 * @property {number} countDiff
 * @property {number} p50Diff
 * @property {number} p95Diff
 * @property {number} totalDiff
 * @property {number} p50Ratio
 */

/**
 * What the diff covers: payload samples (null: all) and spans (null: all).
 * @typedef {{rows: ArrayLike<number>|null, keep: Uint8Array|null}} DiffScope
 */

/**
 * Per name, the numbers of one rollout (payload samples whose `smp_rollout` is `rollout`).
 * @param {Data} d
 * @param {number} rollout index in meta.rollouts
 * @param {Uint8Array|null} [samples] per payload sample, whether it counts (null: all)
 * @param {Uint8Array|null} [keep] per payload span, whether it counts (null: all)
 * @returns {Map<number, DiffSide>}
 */
export function rolloutSide(d, rollout, samples = null, keep = null) {
  /** @type {Map<number, {durs: number[], open: number, slowest: number, best: number, openBest: number, openSlowest: number}>} */
  const acc = new Map();
  for (let s = 0; s < d.nSamples; s++) {
    if (d.smpRollout[s] !== rollout || (samples && !samples[s])) continue;
    for (let i = d.spanOff[s]; i < d.spanOff[s + 1]; i++) {
      const flags = d.spanFlags[i];
      if (flags & F_PD_DETAIL || (keep && !keep[i])) continue;
      const n = d.spanName[i];
      let e = acc.get(n);
      if (!e) {
        e = { durs: [], open: 0, slowest: -1, best: -Infinity, openBest: -Infinity, openSlowest: -1 };
        acc.set(n, e);
      }
      const dur = d.spanEnd[i] - d.spanStart[i];
      if (flags & F_OPEN) {
        e.open++;
        if (dur > e.openBest) [e.openBest, e.openSlowest] = [dur, i];
      } else {
        e.durs.push(dur);
        if (dur > e.best) [e.best, e.slowest] = [dur, i];
      }
    }
  }
  /** @type {Map<number, DiffSide>} */
  const out = new Map();
  for (const [n, e] of acc) {
    const sorted = Float64Array.from(e.durs).sort();
    let total = 0;
    for (const v of e.durs) total += v;
    out.set(n, {
      count: sorted.length,
      p50: quantile(sorted, 0.5),
      p95: quantile(sorted, 0.95),
      total,
      open: e.open,
      slowest: e.slowest >= 0 ? e.slowest : e.openSlowest,
    });
  }
  return out;
}

/**
 * The diff table of rollout `b` against rollout `a`, largest increase of total
 * time first (ties by name).
 * @param {Data} d
 * @param {number} a
 * @param {number} b
 * @param {DiffScope} [scope] what it covers (default: everything)
 * @returns {DiffRow[]}
 */
export function rolloutDiff(d, a, b, scope = { rows: null, keep: null }) {
  let samples = null;
  if (scope.rows) {
    samples = new Uint8Array(d.nSamples);
    for (let k = 0; k < scope.rows.length; k++) samples[scope.rows[k]] = 1;
  }
  const sa = rolloutSide(d, a, samples, scope.keep);
  const sb = rolloutSide(d, b, samples, scope.keep);
  /** @type {DiffRow[]} */
  const rows = [];
  for (const n of new Set([...sa.keys(), ...sb.keys()])) {
    const A = sa.get(n) ?? null;
    const B = sb.get(n) ?? null;
    const p50a = A ? A.p50 : NaN;
    const p50b = B ? B.p50 : NaN;
    rows.push({
      name: n,
      label: nameOf(d, n),
      a: A,
      b: B,
      countDiff: (B ? B.count : 0) - (A ? A.count : 0),
      p50Diff: p50b - p50a,
      p95Diff: (B ? B.p95 : NaN) - (A ? A.p95 : NaN),
      totalDiff: (B ? B.total : 0) - (A ? A.total : 0),
      p50Ratio: p50a > 0 ? p50b / p50a : NaN,
    });
  }
  rows.sort((x, y) => y.totalDiff - x.totalDiff || (x.label < y.label ? -1 : x.label > y.label ? 1 : 0));
  return rows;
}

/**
 * The pair to compare: `want` when both are distinct rollouts of the payload,
 * else the first two.
 * @param {Data} d
 * @param {[number, number]|null} want
 * @returns {[number, number]}
 */
export function diffPair(d, want) {
  const n = d.meta.rollouts.length;
  if (want && want[0] !== want[1] && want.every((r) => Number.isInteger(r) && r >= 0 && r < n)) return [want[0], want[1]];
  return [0, 1];
}
