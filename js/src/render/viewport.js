// The time window and the row scroll as pure arithmetic: clamping a window to
// the data, zooming about a point, fitting rows, framing the selection, the
// scroll that brings a row into view, the label gutter. App applies the results.

import { sampleLabel } from "../data/decode.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {{t0: number, t1: number}} Window */

/** The narrowest window, in seconds (a couple of microseconds). */
export const MIN_SPAN = 2e-6;

/**
 * The window [start, end] kept sane: at least MIN_SPAN and at most four times the
 * data wide, centred where asked, and never entirely off the data.
 * @param {Data} data
 * @param {number} start
 * @param {number} end
 * @returns {Window}
 */
export function clampWindow(data, start, end) {
  const gspan = Math.max(data.globalEnd - data.globalStart, 1e-3);
  let span = Math.max(MIN_SPAN, Math.min(gspan * 4, end - start));
  let t0 = (start + end) / 2 - span / 2;
  if (!Number.isFinite(t0) || !Number.isFinite(span)) {
    t0 = data.globalStart;
    span = gspan;
  }
  t0 = Math.max(data.globalStart - span * 0.9, Math.min(data.globalEnd - span * 0.1, t0));
  return { t0, t1: t0 + span };
}

/**
 * The window scaled by `factor` about time `time` (factor < 1 zooms in); null when it would
 * be narrower than MIN_SPAN.
 * @param {Window} view
 * @param {number} time
 * @param {number} factor
 * @returns {[number, number]|null}
 */
export function zoomedWindow(view, time, factor) {
  const start = time - (time - view.t0) * factor;
  const end = time + (view.t1 - time) * factor;
  return end - start < MIN_SPAN ? null : [start, end];
}

/**
 * The range to fit, padded by 1 %: the rows' samples when `rows` is given
 * and they have times, else everything.
 * @param {Data} data
 * @param {Uint32Array|null} rows
 * @returns {[number, number]}
 */
export function fitRange(data, rows) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const sample of rows ?? []) {
    if (data.smpStart[sample] < lo) lo = data.smpStart[sample];
    if (data.smpEnd[sample] > hi) hi = data.smpEnd[sample];
  }
  if (!(lo < hi)) {
    lo = data.globalStart;
    hi = data.globalEnd;
  }
  const pad = (hi - lo) * 0.01;
  return [lo - pad, hi + pad];
}

/**
 * The window that frames a selection: a span or PD segment with 15 % either
 * side, an event (or, with nothing selected, the cursor) centred at the
 * current width (events at most 2 s wide); null when there is nothing to frame.
 * @param {Data} data
 * @param {import("./hit.js").Hit|null} hit
 * @param {Window} view
 * @param {number} cursor
 * @returns {[number, number]|null}
 */
export function focusWindow(data, hit, view, cursor) {
  let start = NaN;
  let end = NaN;
  if (hit && hit.type === "span") {
    start = data.spanStart[hit.span];
    end = Math.max(data.spanEnd[hit.span], start);
  } else if (hit && hit.type === "segment") {
    start = data.segStart[hit.seg];
    end = data.segEnd[hit.seg];
  } else if (hit && hit.type === "event") {
    const span = Math.min(view.t1 - view.t0, 2);
    start = data.evTs[hit.ev] - span / 2;
    end = data.evTs[hit.ev] + span / 2;
  } else if (Number.isFinite(cursor)) {
    const span = view.t1 - view.t0;
    start = cursor - span / 2;
    end = cursor + span / 2;
  }
  if (!Number.isFinite(start)) return null;
  const width = Math.max(end - start, 1e-3);
  const pad = hit && hit.type !== "event" ? width * 0.15 : 0;
  return [start - pad, start + width + pad];
}

/**
 * The scroll offset that shows row `row` whole (or its top when taller than the
 * view), or null when it is already in view or does not exist.
 * @param {Float64Array|number[]} rowTop row tops, one more than the rows
 * @param {number} row
 * @param {number} scrollTop
 * @param {number} visibleH height of the rows' viewport
 * @returns {number|null}
 */
export function scrollToShow(rowTop, row, scrollTop, visibleH) {
  if (row < 0 || row + 1 >= rowTop.length) return null;
  const top = rowTop[row];
  const bottom = rowTop[row + 1];
  if (top < scrollTop) return top;
  if (bottom > scrollTop + visibleH) return Math.min(top, bottom - visibleH);
  return null;
}

/**
 * Width the row labels need: the widest of the 40 longest labels.
 * @param {Data} data
 * @param {(label: string) => number} measure text width in CSS px
 */
export function labelWidthOf(data, measure) {
  /** @type {string[]} */
  const labels = [];
  for (let sample = 0; sample < data.nSamples; sample++) labels.push(sampleLabel(data, sample) + (Number.isNaN(data.smpStart[sample]) ? " (untraced)" : ""));
  labels.sort((left, right) => right.length - left.length);
  let width = 60;
  for (const label of labels.slice(0, 40)) width = Math.max(width, measure(label));
  return width;
}
