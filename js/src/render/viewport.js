// The time window and the row scroll as pure arithmetic: clamping a window to
// the data, zooming about a point, fitting rows, framing the selection, the
// scroll that brings a row into view, the label gutter. App applies the results.

import { sampleLabel } from "../data/decode.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {{t0: number, t1: number}} Window */

/** The narrowest window, in seconds (a couple of microseconds). */
export const MIN_SPAN = 2e-6;

/**
 * The window [a, b] kept sane: at least MIN_SPAN and at most four times the
 * data wide, centred where asked, and never entirely off the data.
 * @param {Data} d
 * @param {number} a
 * @param {number} b
 * @returns {Window}
 */
export function clampWindow(d, a, b) {
  const gspan = Math.max(d.globalEnd - d.globalStart, 1e-3);
  let span = Math.max(MIN_SPAN, Math.min(gspan * 4, b - a));
  let t0 = (a + b) / 2 - span / 2;
  if (!Number.isFinite(t0) || !Number.isFinite(span)) {
    t0 = d.globalStart;
    span = gspan;
  }
  t0 = Math.max(d.globalStart - span * 0.9, Math.min(d.globalEnd - span * 0.1, t0));
  return { t0, t1: t0 + span };
}

/**
 * The window scaled by `f` about time `t` (f < 1 zooms in); null when it would
 * be narrower than MIN_SPAN.
 * @param {Window} w
 * @param {number} t
 * @param {number} f
 * @returns {[number, number]|null}
 */
export function zoomedWindow(w, t, f) {
  const a = t - (t - w.t0) * f;
  const b = t + (w.t1 - t) * f;
  return b - a < MIN_SPAN ? null : [a, b];
}

/**
 * The range to fit, padded by 1 %: the rows' samples when `rows` is given
 * and they have times, else everything.
 * @param {Data} d
 * @param {Uint32Array|null} rows
 * @returns {[number, number]}
 */
export function fitRange(d, rows) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const s of rows ?? []) {
    if (d.smpStart[s] < lo) lo = d.smpStart[s];
    if (d.smpEnd[s] > hi) hi = d.smpEnd[s];
  }
  if (!(lo < hi)) {
    lo = d.globalStart;
    hi = d.globalEnd;
  }
  const pad = (hi - lo) * 0.01;
  return [lo - pad, hi + pad];
}

/**
 * The window that frames a selection: a span or PD segment with 15 % either
 * side, an event (or, with nothing selected, the cursor) centred at the
 * current width (events at most 2 s wide); null when there is nothing to frame.
 * @param {Data} d
 * @param {import("./hit.js").Hit|null} h
 * @param {Window} w
 * @param {number} cursor
 * @returns {[number, number]|null}
 */
export function focusWindow(d, h, w, cursor) {
  let a = NaN;
  let b = NaN;
  if (h && h.type === "span") {
    a = d.spanStart[h.span];
    b = Math.max(d.spanEnd[h.span], a);
  } else if (h && h.type === "segment") {
    a = d.segStart[h.seg];
    b = d.segEnd[h.seg];
  } else if (h && h.type === "event") {
    const span = Math.min(w.t1 - w.t0, 2);
    a = d.evTs[h.ev] - span / 2;
    b = d.evTs[h.ev] + span / 2;
  } else if (Number.isFinite(cursor)) {
    const span = w.t1 - w.t0;
    a = cursor - span / 2;
    b = cursor + span / 2;
  }
  if (!Number.isFinite(a)) return null;
  const width = Math.max(b - a, 1e-3);
  const pad = h && h.type !== "event" ? width * 0.15 : 0;
  return [a - pad, a + width + pad];
}

/**
 * The scroll offset that shows row `r` whole (or its top when taller than the
 * view), or null when it is already in view or does not exist.
 * @param {Float64Array|number[]} rowTop row tops, one more than the rows
 * @param {number} r
 * @param {number} scrollTop
 * @param {number} visibleH height of the rows' viewport
 * @returns {number|null}
 */
export function scrollToShow(rowTop, r, scrollTop, visibleH) {
  if (r < 0 || r + 1 >= rowTop.length) return null;
  const top = rowTop[r];
  const bottom = rowTop[r + 1];
  if (top < scrollTop) return top;
  if (bottom > scrollTop + visibleH) return Math.min(top, bottom - visibleH);
  return null;
}

/**
 * Width the row labels need: the widest of the 40 longest labels.
 * @param {Data} d
 * @param {(label: string) => number} measure text width in CSS px
 */
export function labelWidthOf(d, measure) {
  /** @type {string[]} */
  const labels = [];
  for (let s = 0; s < d.nSamples; s++) labels.push(sampleLabel(d, s) + (Number.isNaN(d.smpStart[s]) ? " (untraced)" : ""));
  labels.sort((a, b) => b.length - a.length);
  let w = 60;
  for (const l of labels.slice(0, 40)) w = Math.max(w, measure(l));
  return w;
}
