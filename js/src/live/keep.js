// Keeping the selection across a live update: payload indices move when a
// block before them grows, so a selected span (event) is found again in its
// sample's new block by what it is: its lane, start (time) and name.

import { nameOf } from "../data/decode.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../render/hit.js").Hit} Hit */

/**
 * The span of `next` that is span `span` of `old` (same sample, lane, start, name), or -1.
 * @param {Data} old
 * @param {Data} next
 * @param {number} span
 */
export function sameSpan(old, next, span) {
  const sample = old.spanSample[span];
  if (sample >= next.nSamples) return -1;
  const name = nameOf(old, old.spanName[span]);
  for (let i = next.spanOff[sample]; i < next.spanOff[sample + 1]; i++) {
    if (next.spanLane[i] === old.spanLane[span] && next.spanStart[i] === old.spanStart[span] && nameOf(next, next.spanName[i]) === name) return i;
  }
  return -1;
}

/**
 * The event of `next` that is event `ev` of `old`, or -1.
 * @param {Data} old
 * @param {Data} next
 * @param {number} ev
 */
export function sameEvent(old, next, ev) {
  const sample = old.evSample[ev];
  if (sample >= next.nSamples) return -1;
  const name = nameOf(old, old.evName[ev]);
  for (let i = next.evOff[sample]; i < next.evOff[sample + 1]; i++) {
    if (next.evLane[i] === old.evLane[ev] && next.evTs[i] === old.evTs[ev] && nameOf(next, next.evName[i]) === name) return i;
  }
  return -1;
}

/**
 * `hit` (a selection in `old`) in `next`, or null when its item is gone.
 * Rows are left for the app to find again (it lays the rows out after this).
 * @param {Data} old
 * @param {Data} next
 * @param {Hit} hit
 * @returns {Hit|null}
 */
export function keepHit(old, next, hit) {
  if (hit.type === "span" || hit.type === "segment") {
    const span = sameSpan(old, next, hit.span);
    if (span < 0) return null;
    if (hit.type === "span") return { ...hit, span };
    let at = -1;
    for (let p = old.spanSegOff[hit.span]; p < old.spanSegOff[hit.span + 1]; p++) if (old.segOrder[p] === hit.seg) at = p - old.spanSegOff[hit.span];
    const p = next.spanSegOff[span] + at;
    return at >= 0 && p < next.spanSegOff[span + 1] ? { ...hit, span, seg: next.segOrder[p] } : null;
  }
  if (hit.type === "event") {
    const ev = sameEvent(old, next, hit.ev);
    return ev < 0 ? null : { ...hit, ev, members: [ev], count: 1 };
  }
  if (hit.type === "label" || hit.type === "row") return hit.sample < next.nSamples ? hit : null;
  return null;
}
