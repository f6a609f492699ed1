// What became of each sample (its fate, computed by the kernel:
// `answers.ledger.sample_fates`; the renderer never re-derives it) and the
// rollouts' ledger: the time spent split by fate, and when 90% of a rollout's
// samples had finished (`meta.ledger`, docs/payload.md). Pure functions: the
// decoded ledger, fate counts over rows, the ledger bar's segments and the
// 90%-finished markers' places on the time axis.

import CONTRACT from "../../../slime_trace_widget/view/payload_contract.json" with { type: "json" };
import VOCABULARIES from "../../../slime_trace_widget/vocabularies.json" with { type: "json" };

/** The fates, in vocabularies.json's order: a sample's `smp_fate` code indexes it. */
export const FATES = /** @type {string[]} */ (VOCABULARIES.fates);
/** `smp_fate` of a sample with no fate (a payload without fates, or one the kernel left unknown). */
export const FATE_NONE = CONTRACT.fate_none;

/** How each fate reads on screen. */
export const FATE_LABELS = /** @type {Record<string, string>} */ ({
  signal: "signal",
  no_signal: "no signal",
  filtered: "filtered",
  truncated: "truncated",
  aborted: "aborted",
  failed: "failed",
});

/** What each fate means (legend and ledger tooltips). */
export const FATE_MEANINGS = /** @type {Record<string, string>} */ ({
  signal: "kept, in a group whose rewards vary: it carries learning signal",
  no_signal: "kept, but every reward of its group is equal: no signal",
  filtered: "dropped by a filter or marked removed",
  truncated: "hit the length limit",
  aborted: "aborted",
  failed: "failed",
});

/**
 * @typedef {Object} LedgerEntry one rollout's ledger
 * @property {number} rollout index in meta.rollouts
 * @property {number[]} samples samples per fate (FATES order)
 * @property {number[]} seconds seconds per fate
 * @property {number[]} shares share of the rollout's time per fate (0..1)
 * @property {number} finished50 seconds from the rollout's first start until 50% of its samples had finished (NaN: unknown)
 * @property {number} finished90 the same for 90%
 * @property {number} finished99 the same for 99%
 * @property {number} stepS seconds from its first start to its last end
 * @property {number} finished90At epoch seconds of the 90%-finished instant (NaN: unknown)
 * @property {number} offset seconds the rollout's rows are drawn shifted by (smp_offset; align "rollout")
 */

/**
 * @typedef {Object} Ledger
 * @property {LedgerEntry[]} entries one per rollout shown, in meta.rollouts order
 */

/** @param {unknown} value */
const num = (value) => (typeof value === "number" && Number.isFinite(value) ? value : NaN);

/**
 * Six numbers of a per-fate list (missing or malformed ones 0).
 * @param {unknown} list
 */
function perFate(list) {
  const values = Array.isArray(list) ? list : [];
  return FATES.map((_, k) => {
    const value = num(values[k]);
    return Number.isNaN(value) || value < 0 ? 0 : value;
  });
}

/**
 * `meta.ledger` as the renderer uses it; malformed parts are dropped, never thrown on.
 * @param {any} raw `{rollout: [k], samples: [[6]], seconds: [[6]], shares: [[6]], finished_50: [s], ...}`
 * @param {number} nRollouts length of meta.rollouts
 * @returns {Ledger}
 */
export function decodeLedger(raw, nRollouts) {
  /** @type {LedgerEntry[]} */
  const entries = [];
  if (!raw || typeof raw !== "object" || !Array.isArray(raw.rollout)) return { entries };
  const column = (/** @type {string} */ name) => (Array.isArray(raw[name]) ? raw[name] : []);
  const [samples, seconds, shares] = ["samples", "seconds", "shares"].map(column);
  const [f50, f90, f99, step, at, offset] = ["finished_50", "finished_90", "finished_99", "step_s", "finished_90_at", "offset"].map(column);
  raw.rollout.forEach((/** @type {unknown} */ rollout, /** @type {number} */ k) => {
    if (!Number.isInteger(rollout) || /** @type {number} */ (rollout) < 0 || /** @type {number} */ (rollout) >= nRollouts) return;
    const entry = {
      rollout: /** @type {number} */ (rollout),
      samples: perFate(samples[k]),
      seconds: perFate(seconds[k]),
      shares: perFate(shares[k]),
      finished50: num(f50[k]),
      finished90: num(f90[k]),
      finished99: num(f99[k]),
      stepS: num(step[k]),
      finished90At: num(at[k]),
      offset: Number.isFinite(offset[k]) ? offset[k] : 0,
    };
    entries.push(entry);
  });
  entries.sort((first, second) => first.rollout - second.rollout);
  return { entries };
}

/**
 * Samples per fate code among `rows` (payload sample indices): FATES.length
 * counts, then the samples with no fate.
 * @param {Uint8Array} smpFate
 * @param {ArrayLike<number>} rows
 */
export function fateCounts(smpFate, rows) {
  const counts = new Array(FATES.length + 1).fill(0);
  for (let i = 0; i < rows.length; i++) {
    const code = smpFate[rows[i]];
    counts[code < FATES.length ? code : FATES.length]++;
  }
  return counts;
}

/**
 * Whether any sample has a fate (payloads from before fates have none).
 * @param {Uint8Array} smpFate
 */
export function hasFates(smpFate) {
  for (let i = 0; i < smpFate.length; i++) if (smpFate[i] < FATES.length) return true;
  return false;
}

/**
 * @typedef {Object} LedgerSegment one fate's part of a ledger bar
 * @property {number} fate index in FATES
 * @property {number} from left edge, a fraction of the bar (0..1)
 * @property {number} to right edge, a fraction of the bar
 * @property {number} seconds
 * @property {number} samples
 * @property {number} share share of the rollout's time, as the ledger gives it
 * @property {string} label the text on the segment: fate and share
 */

/**
 * The stacked bar of one rollout's ledger: a segment per fate that took time,
 * in FATES order, each as wide as its seconds (fractions of the whole bar).
 * A fate with samples but no seconds gets no segment (the tooltip of the bar's
 * label still counts it).
 * @param {LedgerEntry} entry
 * @returns {LedgerSegment[]}
 */
export function ledgerSegments(entry) {
  const total = entry.seconds.reduce((sum, value) => sum + value, 0);
  /** @type {LedgerSegment[]} */
  const out = [];
  if (!(total > 0)) return out;
  let seen = 0;
  FATES.forEach((fate, k) => {
    const seconds = entry.seconds[k];
    if (!(seconds > 0)) return;
    const from = seen / total;
    seen += seconds;
    const share = entry.shares[k] > 0 ? entry.shares[k] : seconds / total;
    out.push({ fate: k, from, to: seen / total, seconds, samples: entry.samples[k], share, label: `${FATE_LABELS[fate] ?? fate} ${formatShare(share)}` });
  });
  if (out.length) out[out.length - 1].to = 1; // no sliver lost to rounding
  return out;
}

/**
 * A share as a label: "42%", "3.5%", "<0.1%".
 * @param {number} share 0..1
 */
export function formatShare(share) {
  const pct = share * 100;
  if (!(pct > 0)) return "0%";
  if (pct < 0.1) return "<0.1%";
  return pct < 10 ? `${pct.toFixed(1).replace(/\.0$/, "")}%` : `${Math.round(pct)}%`;
}

/**
 * @typedef {Object} FinishMarker
 * @property {number} rollout index in meta.rollouts
 * @property {number} time where it is drawn: payload time (seconds after meta.t0, less the rollout's offset)
 * @property {number} seconds seconds from the rollout's first start (tail_price's finished_90)
 */

/**
 * The 90%-finished instant of each rollout of the ledger that has one, on the
 * renderer's time axis: its absolute time less meta.t0 and the rollout's
 * drawing offset (so with align "rollout" each sits over its own rows).
 * @param {Ledger} ledger
 * @param {number} t0 meta.t0
 * @returns {FinishMarker[]}
 */
export function finishMarkers(ledger, t0) {
  /** @type {FinishMarker[]} */
  const out = [];
  for (const entry of ledger.entries) {
    if (Number.isNaN(entry.finished90At)) continue;
    out.push({ rollout: entry.rollout, time: entry.finished90At - t0 - entry.offset, seconds: entry.finished90 });
  }
  return out;
}

/**
 * @typedef {Object} PlacedMarker
 * @property {FinishMarker} marker
 * @property {number} x canvas px
 * @property {string} text its label
 * @property {number} labelX left edge of the label, NaN when it is left out (it would overlap another)
 * @property {number} labelW label width, px
 */

/**
 * Where the markers go on an axis from `plotX` to `plotX + plotW` showing
 * `[t0, t1]`: those in the window, each labelled unless its label would run
 * into an earlier one's (the label sits right of the marker, or left of it at
 * the plot's right edge).
 * @param {FinishMarker[]} markers
 * @param {{plotX: number, plotW: number, t0: number, t1: number}} axis
 * @param {(text: string) => number} measure label width in px (text plus padding)
 * @param {string[]} [rolloutNames] meta.rollouts, named in the labels when more than one marker
 * @returns {PlacedMarker[]}
 */
export function placeMarkers(markers, axis, measure, rolloutNames = []) {
  const span = Math.max(axis.t1 - axis.t0, 1e-12);
  const several = markers.length > 1;
  const placed = markers
    .map((marker) => ({ marker, x: axis.plotX + ((marker.time - axis.t0) * axis.plotW) / span }))
    .filter((item) => item.x >= axis.plotX - 0.5 && item.x <= axis.plotX + axis.plotW + 0.5)
    .sort((first, second) => first.x - second.x);
  let right = -Infinity;
  return placed.map(({ marker, x }) => {
    const text = finishLabel(marker, several ? rolloutNames[marker.rollout] : undefined);
    const labelW = measure(text);
    let labelX = x + 4;
    if (labelX + labelW > axis.plotX + axis.plotW) labelX = x - 4 - labelW;
    if (labelX < right + 4 || labelX < axis.plotX) labelX = NaN;
    else right = labelX + labelW;
    return { marker, x, text, labelX, labelW };
  });
}

/**
 * "90% finished at 12.3 s" (seconds from the rollout's first start), with the rollout named when given.
 * @param {FinishMarker} marker
 * @param {string} [rolloutName]
 */
export function finishLabel(marker, rolloutName) {
  const at = `90% finished at ${formatSeconds(marker.seconds)}`;
  return rolloutName ? `${rolloutName}: ${at}` : at;
}

/**
 * Seconds as "12.3 s", "0.42 s", "1,234 s" (the label's unit stays seconds).
 * @param {number} seconds
 */
export function formatSeconds(seconds) {
  if (!Number.isFinite(seconds)) return "? s";
  const size = Math.abs(seconds);
  if (size >= 100) return `${Math.round(seconds).toLocaleString("en-US")} s`;
  if (size >= 10) return `${seconds.toFixed(1)} s`;
  return `${seconds.toFixed(2)} s`;
}
