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
 * @param {import("./decode.js").Data} data
 * @param {VisOptions} options
 * @returns {Uint8Array}
 */
export function spanVisibility(data, options) {
  const nSpans = data.nSpans;
  const out = new Uint8Array(nSpans);
  const { flagsOk, attemptOk } = makeTests(options);
  const hl = options.highlightName;
  const keep = options.keep ?? null;
  const focus = options.focus ?? null;
  for (let i = 0; i < nSpans; i++) {
    const fl = data.spanFlags[i];
    if (fl & F_PD_DETAIL || !flagsOk(fl)) continue;
    if (keep && !keep[i]) continue;
    const visibility = attemptOk(data.spanAttempt[i]);
    if (visibility === HIDDEN) continue;
    out[i] = visibility === DIMMED || (hl >= 0 && data.spanName[i] !== hl) || (focus && !focus[i]) ? DIMMED : SHOWN;
  }
  return out;
}

/**
 * Visibility of each instant event / unmatched end.
 * @param {import("./decode.js").Data} data
 * @param {VisOptions} options
 * @returns {Uint8Array}
 */
export function eventVisibility(data, options) {
  const nEvents = data.nEvents;
  const out = new Uint8Array(nEvents);
  const { attemptOk } = makeTests(options);
  const hl = options.highlightName;
  const keep = options.evKeep ?? null;
  const focus = options.evFocus ?? null;
  for (let i = 0; i < nEvents; i++) {
    const unmatched = data.evKind[i] === EV_UNMATCHED;
    if (unmatched ? !options.showUnmatched : !options.showEvents) continue;
    if (keep && !keep[i]) continue;
    const visibility = attemptOk(data.evAttempt[i]);
    if (visibility === HIDDEN) continue;
    out[i] = visibility === DIMMED || (hl >= 0 && data.evName[i] !== hl) || (focus && !focus[i]) ? DIMMED : SHOWN;
  }
  return out;
}

/** @param {VisOptions} options */
function makeTests(options) {
  const wanted = options.attempt;
  const highlight = options.attemptMode === "highlight";
  return {
    /** @param {number} fl */
    flagsOk: (fl) => options.showOpen || !(fl & F_OPEN),
    /** @param {number} attempt */
    attemptOk: (attempt) => (wanted < 0 || attempt === wanted ? SHOWN : highlight ? DIMMED : HIDDEN),
  };
}
