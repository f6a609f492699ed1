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
import { compareCodePoints } from "../util/text.js";

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
 * @param {Data} data
 * @param {number} rollout index in meta.rollouts
 * @param {Uint8Array|null} [samples] per payload sample, whether it counts (null: all)
 * @param {Uint8Array|null} [keep] per payload span, whether it counts (null: all)
 * @returns {Map<number, DiffSide>}
 */
export function rolloutSide(data, rollout, samples = null, keep = null) {
  /** @type {Map<number, {durs: number[], open: number, slowest: number, best: number, openBest: number, openSlowest: number}>} */
  const acc = new Map();
  for (let sample = 0; sample < data.nSamples; sample++) {
    if (data.smpRollout[sample] !== rollout || (samples && !samples[sample])) continue;
    for (let i = data.spanOff[sample]; i < data.spanOff[sample + 1]; i++) {
      const flags = data.spanFlags[i];
      if (flags & F_PD_DETAIL || (keep && !keep[i])) continue;
      const nameIndex = data.spanName[i];
      let entry = acc.get(nameIndex);
      if (!entry) {
        entry = { durs: [], open: 0, slowest: -1, best: -Infinity, openBest: -Infinity, openSlowest: -1 };
        acc.set(nameIndex, entry);
      }
      const dur = data.spanEnd[i] - data.spanStart[i];
      if (flags & F_OPEN) {
        entry.open++;
        if (dur > entry.openBest) [entry.openBest, entry.openSlowest] = [dur, i];
      } else {
        entry.durs.push(dur);
        if (dur > entry.best) [entry.best, entry.slowest] = [dur, i];
      }
    }
  }
  /** @type {Map<number, DiffSide>} */
  const out = new Map();
  for (const [nameIndex, entry] of acc) {
    const sorted = Float64Array.from(entry.durs).sort();
    let total = 0;
    for (const dur of entry.durs) total += dur;
    out.set(nameIndex, {
      count: sorted.length,
      p50: quantile(sorted, 0.5),
      p95: quantile(sorted, 0.95),
      total,
      open: entry.open,
      slowest: entry.slowest >= 0 ? entry.slowest : entry.openSlowest,
    });
  }
  return out;
}

/**
 * The diff table of rollout `rolloutB` against rollout `rolloutA`, largest increase of total
 * time first (ties by name).
 * @param {Data} data
 * @param {number} rolloutA
 * @param {number} rolloutB
 * @param {DiffScope} [scope] what it covers (default: everything)
 * @returns {DiffRow[]}
 */
export function rolloutDiff(data, rolloutA, rolloutB, scope = { rows: null, keep: null }) {
  let samples = null;
  if (scope.rows) {
    samples = new Uint8Array(data.nSamples);
    for (let index = 0; index < scope.rows.length; index++) samples[scope.rows[index]] = 1;
  }
  const sa = rolloutSide(data, rolloutA, samples, scope.keep);
  const sb = rolloutSide(data, rolloutB, samples, scope.keep);
  /** @type {DiffRow[]} */
  const rows = [];
  for (const nameIndex of new Set([...sa.keys(), ...sb.keys()])) {
    const sideA = sa.get(nameIndex) ?? null;
    const sideB = sb.get(nameIndex) ?? null;
    const p50a = sideA ? sideA.p50 : NaN;
    const p50b = sideB ? sideB.p50 : NaN;
    rows.push({
      name: nameIndex,
      label: nameOf(data, nameIndex),
      a: sideA,
      b: sideB,
      countDiff: (sideB ? sideB.count : 0) - (sideA ? sideA.count : 0),
      p50Diff: p50b - p50a,
      p95Diff: (sideB ? sideB.p95 : NaN) - (sideA ? sideA.p95 : NaN),
      totalDiff: (sideB ? sideB.total : 0) - (sideA ? sideA.total : 0),
      p50Ratio: p50a > 0 ? p50b / p50a : NaN,
    });
  }
  // Ties by name as Python sorts them (code points, the name itself, not its label).
  const nameText = (/** @type {DiffRow} */ row) => data.names[row.name] ?? row.label;
  rows.sort((left, right) => right.totalDiff - left.totalDiff || compareCodePoints(nameText(left), nameText(right)));
  return rows;
}

/**
 * The pair to compare: `want` when both are distinct rollouts of the payload,
 * else the first two.
 * @param {Data} data
 * @param {[number, number]|null} want
 * @returns {[number, number]}
 */
export function diffPair(data, want) {
  const nRollouts = data.meta.rollouts.length;
  if (want && want[0] !== want[1] && want.every((rollout) => Number.isInteger(rollout) && rollout >= 0 && rollout < nRollouts)) return [want[0], want[1]];
  return [0, 1];
}
