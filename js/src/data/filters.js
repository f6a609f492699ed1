// Per-item visibility masks from the toggles, the attempt filter, the legend
// highlight and the views' masks (a query's matches hide the rest; a focus such
// as a critical path or a flame frame dims the rest): 0 hidden, 1 drawn, 2 drawn
// dimmed. Recomputed only when one of those changes (one linear pass), read by
// every frame.

import { F_OPEN, F_PD_DETAIL, EV_UNMATCHED } from "./decode.js";

/**
 * Masks the views lay over the payload (null: no effect). A query hides
 * (`keep`, `evKeep`, and `rowKeep` per payload sample: rows without a match
 * go); a focus dims (`focus`, `evFocus`: the critical path, a flame frame).
 * @typedef {Object} ViewMasks
 * @property {Uint8Array|null} keep
 * @property {Uint8Array|null} evKeep
 * @property {Uint8Array|null} rowKeep
 * @property {Uint8Array|null} focus
 * @property {Uint8Array|null} evFocus
 */

export const HIDDEN = 0;
export const SHOWN = 1;
export const DIMMED = 2;

/**
 * @typedef {Object} VisOptions
 * @property {boolean} showOpen
 * @property {boolean} showEvents
 * @property {boolean} showUnmatched
 * @property {number} attempt -1 for all attempts
 * @property {"filter"|"highlight"} attemptMode
 * @property {number} highlightName name index to highlight, -1 for none
 * @property {Uint8Array|null} [keep] per span, 0 = hidden (a query's non-matches); null keeps all
 * @property {Uint8Array|null} [evKeep] the same per event
 * @property {Uint8Array|null} [focus] per span, 0 = dimmed (outside a critical path or flame frame); null dims none
 * @property {Uint8Array|null} [evFocus] the same per event
 */

/**
 * Visibility of each span. PD-detail spans are never drawn (their virtual
 * lane shows them); virtual spans follow the same rules as others.
 * @param {import("./decode.js").Data} d
 * @param {VisOptions} o
 * @returns {Uint8Array}
 */
export function spanVisibility(d, o) {
  const n = d.nSpans;
  const out = new Uint8Array(n);
  const { flagsOk, attemptOk } = makeTests(o);
  const hl = o.highlightName;
  const keep = o.keep ?? null;
  const focus = o.focus ?? null;
  for (let i = 0; i < n; i++) {
    const fl = d.spanFlags[i];
    if (fl & F_PD_DETAIL || !flagsOk(fl)) continue;
    if (keep && !keep[i]) continue;
    const a = attemptOk(d.spanAttempt[i]);
    if (a === HIDDEN) continue;
    out[i] = a === DIMMED || (hl >= 0 && d.spanName[i] !== hl) || (focus && !focus[i]) ? DIMMED : SHOWN;
  }
  return out;
}

/**
 * Visibility of each instant event / unmatched end.
 * @param {import("./decode.js").Data} d
 * @param {VisOptions} o
 * @returns {Uint8Array}
 */
export function eventVisibility(d, o) {
  const n = d.nEvents;
  const out = new Uint8Array(n);
  const { attemptOk } = makeTests(o);
  const hl = o.highlightName;
  const keep = o.evKeep ?? null;
  const focus = o.evFocus ?? null;
  for (let i = 0; i < n; i++) {
    const unmatched = d.evKind[i] === EV_UNMATCHED;
    if (unmatched ? !o.showUnmatched : !o.showEvents) continue;
    if (keep && !keep[i]) continue;
    const a = attemptOk(d.evAttempt[i]);
    if (a === HIDDEN) continue;
    out[i] = a === DIMMED || (hl >= 0 && d.evName[i] !== hl) || (focus && !focus[i]) ? DIMMED : SHOWN;
  }
  return out;
}

/** @param {VisOptions} o */
function makeTests(o) {
  const k = o.attempt;
  const highlight = o.attemptMode === "highlight";
  return {
    /** @param {number} fl */
    flagsOk: (fl) => o.showOpen || !(fl & F_OPEN),
    /** @param {number} a */
    attemptOk: (a) => (k < 0 || a === k ? SHOWN : highlight ? DIMMED : HIDDEN),
  };
}
