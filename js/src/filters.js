// Per-item visibility masks from the toggles, the attempt filter and the
// legend highlight: 0 hidden, 1 drawn, 2 drawn dimmed. Recomputed only when
// one of those settings changes (one linear pass), read by every frame.

import { F_OPEN, F_PD_DETAIL, EV_UNMATCHED } from "./decode.js";

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
  for (let i = 0; i < n; i++) {
    const fl = d.spanFlags[i];
    if (fl & F_PD_DETAIL || !flagsOk(fl)) continue;
    const a = attemptOk(d.spanAttempt[i]);
    if (a === HIDDEN) continue;
    out[i] = a === DIMMED || (hl >= 0 && d.spanName[i] !== hl) ? DIMMED : SHOWN;
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
  for (let i = 0; i < n; i++) {
    const unmatched = d.evKind[i] === EV_UNMATCHED;
    if (unmatched ? !o.showUnmatched : !o.showEvents) continue;
    const a = attemptOk(d.evAttempt[i]);
    if (a === HIDDEN) continue;
    out[i] = a === DIMMED || (hl >= 0 && d.evName[i] !== hl) ? DIMMED : SHOWN;
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
