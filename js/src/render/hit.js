// Geometry shared by painting and picking, and pointer -> item hit testing.
// All coordinates are CSS pixels of the timeline canvas; the backing store is
// CSS size × devicePixelRatio, so device pixels are divided by dpr first.

import { F_VIRTUAL, F_PD_DETAIL, F_ENGINE, EV_INSTANT, EV_UNMATCHED, LK_SPANS, LK_VIRTUAL, PD_DECODE } from "../data/decode.js";
import { barBox, bandBox, laneAtY, rowAtY } from "../data/layout.js";
import { LANE_OWN } from "../data/engine_lanes.js";
import { firstReaching, clusterSorted, gatherEvents, ClusterBuffer, EventScratch } from "./lod.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../data/layout.js").Layout} Layout */
/** @typedef {import("./lod.js").TimeScale} TimeScale */

/**
 * @typedef {Object} Geo
 * @property {number} width canvas width (CSS px)
 * @property {number} height canvas height (CSS px)
 * @property {number} gutter width of the row-label column
 * @property {number} plotX x of the plot's left edge
 * @property {number} plotW plot width
 * @property {number} axisH top of the rows: the time axis and, under it, the load tracks
 * @property {number} tracksH height of the load tracks (render/tracks.js), 0 without
 * @property {number} scrollTop vertical scroll of the rows (content px)
 * @property {number} t0 visible window start (s)
 * @property {number} t1 visible window end (s)
 */

/** Px within which events are clustered into one marker. */
export const CLUSTER_PX = 8;

/** @param {Geo} geometry @returns {TimeScale} */
export function scaleOf(geometry) {
  return { t0: geometry.t0, t1: geometry.t1, pxPerSec: geometry.plotW / Math.max(geometry.t1 - geometry.t0, 1e-12), x0: geometry.plotX };
}
/** @param {Geo} geometry @param {number} time */
export const xOf = (geometry, time) => geometry.plotX + ((time - geometry.t0) * geometry.plotW) / Math.max(geometry.t1 - geometry.t0, 1e-12);
/** @param {Geo} geometry @param {number} x */
export const timeAt = (geometry, x) => geometry.t0 + ((x - geometry.plotX) * (geometry.t1 - geometry.t0)) / Math.max(geometry.plotW, 1);
/** Content y (row space) of a canvas y. @param {Geo} geometry @param {number} y */
export const contentY = (geometry, y) => y - geometry.axisH + geometry.scrollTop;
/** Canvas y of a content y. @param {Geo} geometry @param {number} cy */
export const canvasY = (geometry, cy) => cy - geometry.scrollTop + geometry.axisH;

/**
 * Pointer position relative to the canvas in CSS px.
 * @param {number} clientX
 * @param {number} clientY
 * @param {{left: number, top: number}} rect canvas.getBoundingClientRect()
 */
export function clientToCanvas(clientX, clientY, rect) {
  return { x: clientX - rect.left, y: clientY - rect.top };
}

/**
 * Device (backing-store) pixel -> CSS px.
 * @param {number} px
 * @param {number} py
 * @param {number} dpr
 */
export function deviceToCss(px, py, dpr) {
  const ratio = dpr > 0 ? dpr : 1;
  return { x: px / ratio, y: py / ratio };
}

/**
 * Band of a PD phase inside a collapsed generation bar: a thin strip at the
 * bottom of the bar, prefill over decode.
 * @param {{y: number, h: number}} box
 * @param {number} phase PD_PREFILL or PD_DECODE
 */
export function pdBand(box, phase) {
  const bandH = Math.max(4, Math.round(box.h * 0.36));
  const half = bandH / 2;
  const top = box.y + box.h - bandH;
  return phase === PD_DECODE ? { y: top + half, h: half } : { y: top, h: half };
}

/**
 * Vertical centre and radius of event markers in a bar box.
 * @param {{y: number, h: number}} box
 */
export function markerGeom(box) {
  const radius = Math.max(2.5, Math.min(4, box.h * 0.24));
  // Markers ride along the top edge of the bar, leaving its body readable.
  return { cy: box.y + Math.min(radius + 1, box.h / 2), r: radius };
}

/**
 * Canvas box (CSS px, unclipped) of a span as drawn; null when its row is
 * filtered out or the span is never drawn (PD detail). In a collapsed row an
 * engine span's box is the band over its time, where its slices' pieces are.
 * @param {Data} data
 * @param {Layout} layout
 * @param {Geo} geometry
 * @param {number} span span index
 * @returns {{x: number, y: number, w: number, h: number}|null}
 */
export function spanBox(data, layout, geometry, span) {
  if (span < 0 || span >= data.nSpans) return null;
  const row = layout.rowOfSample[data.spanSample[span]] ?? -1;
  if (row < 0 || data.spanFlags[span] & F_PD_DETAIL) return null;
  const ex = !!layout.expanded[row];
  let box = !ex && data.spanFlags[span] & F_ENGINE ? bandBox(layout, row) : barBox(layout, row, ex ? data.spanLane[span] : 0);
  if (!ex && data.spanFlags[span] & F_VIRTUAL) box = pdBand(box, data.spanPd[span]);
  const start = data.spanStart[span];
  let end = data.spanEnd[span];
  if (!(end >= start)) end = start;
  const x0 = xOf(geometry, start);
  const x1 = xOf(geometry, end);
  return { x: x0, y: canvasY(geometry, box.y), w: Math.max(1, x1 - x0), h: box.h };
}

/**
 * Canvas box of a PD segment.
 * @param {Data} data
 * @param {Layout} layout
 * @param {Geo} geometry
 * @param {number} seg
 */
export function segmentBox(data, layout, geometry, seg) {
  const box = spanBox(data, layout, geometry, data.segSpan[seg]);
  if (!box) return null;
  const x0 = xOf(geometry, data.segStart[seg]);
  const x1 = xOf(geometry, data.segEnd[seg]);
  return { x: x0, y: box.y, w: Math.max(1, x1 - x0), h: box.h };
}

/**
 * Canvas box around an event marker.
 * @param {Data} data
 * @param {Layout} layout
 * @param {Geo} geometry
 * @param {number} ev
 */
export function eventBox(data, layout, geometry, ev) {
  if (ev < 0 || ev >= data.nEvents) return null;
  const row = layout.rowOfSample[data.evSample[ev]] ?? -1;
  if (row < 0) return null;
  const box = barBox(layout, row, layout.expanded[row] ? data.evLane[ev] : 0);
  const marker = markerGeom(box);
  const x = xOf(geometry, data.evTs[ev]);
  return { x: x - marker.r, y: canvasY(geometry, marker.cy) - marker.r, w: 2 * marker.r, h: 2 * marker.r };
}

/**
 * Canvas box of a hit item (span, segment, event).
 * @param {Data} data
 * @param {Layout} layout
 * @param {Geo} geometry
 * @param {Hit|null} hit
 */
export function hitBox(data, layout, geometry, hit) {
  if (!hit) return null;
  if (hit.type === "span") return spanBox(data, layout, geometry, hit.span);
  if (hit.type === "segment") return segmentBox(data, layout, geometry, hit.seg);
  if (hit.type === "event") return eventBox(data, layout, geometry, hit.ev);
  return null;
}

/**
 * Lane slots a row shows at `lane` (-1 = all lanes: collapsed row).
 * @param {Data} data
 * @param {number} sample
 * @param {number} lane
 * @returns {[number, number]} [first slot, end slot)
 */
export function laneSlots(data, sample, lane) {
  const base = data.laneBase[sample];
  if (lane < 0) return [base, base + data.nLanes[sample]];
  return [base + lane, base + lane + 1];
}

/**
 * Gather the visible events of one kind in a row (all lanes when collapsed,
 * but not the engine's, one lane when expanded), sorted by x, and cluster them.
 * @param {Data} data
 * @param {number} sample sample
 * @param {number} lane -1 for all lanes
 * @param {TimeScale} sc
 * @param {Uint8Array} evVis
 * @param {number} kind EV_INSTANT or EV_UNMATCHED
 * @param {EventScratch} scratch
 * @param {ClusterBuffer} out
 */
export function rowEventClusters(data, sample, lane, sc, evVis, kind, scratch, out) {
  scratch.reset();
  out.reset();
  const [firstSlot, endSlot] = laneSlots(data, sample, lane);
  const ownOnly = lane < 0 && data.hasEngine;
  const keep = (/** @type {number} */ ev) => evVis[ev] !== 0 && data.evKind[ev] === kind && !(ownOnly && data.evEngine[ev]);
  let lanesUsed = 0;
  for (let slot = firstSlot; slot < endSlot; slot++) {
    const lo = data.laneEvOff[slot];
    const hi = data.laneEvOff[slot + 1];
    if (hi <= lo) continue;
    const before = scratch.n;
    gatherEvents(data.evTs, lo, hi, sc, CLUSTER_PX * 2, keep, scratch);
    if (scratch.n > before) lanesUsed++;
  }
  if (lanesUsed > 1) scratch.sort();
  clusterSorted(scratch.xs, scratch.ids, scratch.n, CLUSTER_PX, out);
}

/**
 * Best span of lane slot `slot` at time `time` (± tol): exact containment first, then
 * the nearest edge; ties go to the shorter span. Spans with a flag of `skip` are passed over.
 * @param {Data} data
 * @param {number} slot lane slot
 * @param {Uint8Array} vis
 * @param {number} time
 * @param {number} tol seconds
 * @param {number} [skip] span flags to pass over
 * @returns {{i: number, err: number}}
 */
export function spanInLane(data, slot, vis, time, tol, skip = 0) {
  const lo = data.laneSpanOff[slot];
  const hi = data.laneSpanOff[slot + 1];
  let best = -1;
  let bestErr = Infinity;
  let bestDur = Infinity;
  for (let i = firstReaching(data.spanEndMax, lo, hi, time - tol); i < hi; i++) {
    const start = data.spanStart[i];
    if (start > time + tol) break;
    if (vis[i] === 0 || data.spanFlags[i] & skip) continue;
    let end = data.spanEnd[i];
    if (!(end >= start)) end = start;
    const err = time < start ? start - time : time > end ? time - end : 0;
    if (err > tol) continue;
    const dur = end - start;
    if (err < bestErr || (err === bestErr && dur < bestDur)) {
      best = i;
      bestErr = err;
      bestDur = dur;
    }
  }
  return { i: best, err: bestErr };
}

/**
 * Segment of virtual span `span` at time `time` (± tol), or -1.
 * @param {Data} data
 * @param {number} span
 * @param {number} time
 * @param {number} tol
 */
export function segmentAt(data, span, time, tol) {
  let best = -1;
  let bestErr = Infinity;
  for (let orderIndex = data.spanSegOff[span]; orderIndex < data.spanSegOff[span + 1]; orderIndex++) {
    const seg = data.segOrder[orderIndex];
    const start = data.segStart[seg];
    const end = data.segEnd[seg];
    const err = time < start ? start - time : time > end ? time - end : 0;
    if (err <= tol && err < bestErr) {
      best = seg;
      bestErr = err;
    }
  }
  return best;
}

/**
 * @typedef {{type: "axis", t: number}
 *   | {type: "label", row: number, sample: number}
 *   | {type: "row", row: number, sample: number, t: number}
 *   | {type: "span", row: number, sample: number, span: number, t: number}
 *   | {type: "segment", row: number, sample: number, span: number, seg: number, t: number}
 *   | {type: "event", row: number, sample: number, ev: number, count: number, members: number[], t: number}} Hit
 */
/** @typedef {Extract<Hit, {type: "span" | "segment" | "event"}>} ItemHit what the details panel describes */

/**
 * Whether `hit` is an item the details panel describes: a span, a PD segment or an event.
 * @param {Hit|null|undefined} hit
 * @returns {hit is ItemHit}
 */
export function isItem(hit) {
  return !!hit && (hit.type === "span" || hit.type === "segment" || hit.type === "event");
}

const scratch = new EventScratch(256);
const clusters = new ClusterBuffer(256);

/**
 * What is under canvas point (x, y)?
 * @param {Data} data
 * @param {Layout} layout
 * @param {Geo} geometry
 * @param {Uint8Array} vis span visibility
 * @param {Uint8Array} evVis event visibility
 * @param {number} x CSS px
 * @param {number} y CSS px
 * @returns {Hit|null}
 */
export function hitTest(data, layout, geometry, vis, evVis, x, y) {
  if (y < 0 || x < 0 || x > geometry.width || y > geometry.height) return null;
  if (y < geometry.axisH) return { type: "axis", t: timeAt(geometry, x) };
  const cy = contentY(geometry, y);
  const row = rowAtY(layout, cy);
  if (row < 0) return null;
  const sample = layout.rows[row];
  if (x < geometry.gutter) return { type: "label", row, sample };
  const time = timeAt(geometry, x);
  const rowHit = /** @type {Hit} */ ({ type: "row", row, sample, t: time });
  if (x < geometry.plotX || x > geometry.plotX + geometry.plotW) return rowHit;
  const expanded = !!layout.expanded[row];
  const lane = expanded ? laneAtY(data, layout, row, cy) : -1;
  const box = barBox(layout, row, Math.max(lane, 0));
  if (cy < box.y - 1 || cy > box.y + box.h + 1) return rowHit;
  const sc = scaleOf(geometry);

  // Event markers are drawn on top: test them first.
  const mg = markerGeom(box);
  if (Math.abs(cy - mg.cy) <= mg.r + 1.5) {
    /** @type {Hit|null} */
    let bestEv = null;
    let bestDx = Infinity;
    for (const kind of [EV_UNMATCHED, EV_INSTANT]) {
      rowEventClusters(data, sample, lane, sc, evVis, kind, scratch, clusters);
      for (let cluster = 0; cluster < clusters.n; cluster++) {
        const dx = Math.abs(clusters.x[cluster] - x);
        if (dx <= mg.r + 2 && dx < bestDx) {
          // Members: the gathered ids from the cluster's first id on.
          let start = 0;
          while (start < scratch.n && scratch.ids[start] !== clusters.first[cluster]) start++;
          const members = Array.from(scratch.ids.subarray(start, start + clusters.count[cluster]));
          bestDx = dx;
          bestEv = { type: "event", row, sample, ev: clusters.first[cluster], count: clusters.count[cluster], members, t: time };
        }
      }
    }
    if (bestEv) return bestEv;
  }

  const tol = 2 / sc.pxPerSec;
  const [firstSlot, endSlot] = laneSlots(data, sample, lane);

  // PD phases: lanes in an expanded row, a thin band in a collapsed one.
  for (let slot = firstSlot; slot < endSlot; slot++) {
    if (!(data.laneKind[slot] & LK_VIRTUAL)) continue;
    const { i: span } = spanInLane(data, slot, vis, time, tol);
    if (span < 0 || !(data.spanFlags[span] & F_VIRTUAL)) continue;
    if (!expanded) {
      const band = pdBand(box, data.spanPd[span]);
      if (cy < band.y - 0.5 || cy > band.y + band.h + 0.5) continue;
    }
    const seg = segmentAt(data, span, time, tol);
    if (seg >= 0) return { type: "segment", row, sample, span, seg, t: time };
    return { type: "span", row, sample, span, t: time };
  }

  // Ordinary spans: in a collapsed row the deepest of the sample's own wins (drawn on
  // top); the engine's spans are only its band there, under the bar.
  let best = -1;
  let bestErr = Infinity;
  let bestDepth = -1;
  const skip = expanded ? 0 : F_ENGINE;
  for (let slot = firstSlot; slot < endSlot; slot++) {
    if (!(data.laneKind[slot] & LK_SPANS) || (!expanded && !(data.laneMix[slot] & LANE_OWN))) continue;
    const { i: span, err } = spanInLane(data, slot, vis, time, tol, skip);
    if (span < 0 || data.spanFlags[span] & F_VIRTUAL) continue;
    const depth = data.spanDepth[span];
    const better = (err === 0 ? 0 : 1) < (bestErr === 0 ? 0 : 1) || ((err === 0) === (bestErr === 0) && (depth > bestDepth || (depth === bestDepth && err < bestErr)));
    if (best < 0 || better) {
      best = span;
      bestErr = err;
      bestDepth = depth;
    }
  }
  if (best >= 0) return { type: "span", row, sample, span: best, t: time };
  return rowHit;
}
