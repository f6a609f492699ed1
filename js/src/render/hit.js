// Geometry shared by painting and picking, and pointer -> item hit testing.
// All coordinates are CSS pixels of the timeline canvas; the backing store is
// CSS size × devicePixelRatio, so device pixels are divided by dpr first.

import { F_VIRTUAL, F_PD_DETAIL, EV_INSTANT, EV_UNMATCHED, LK_SPANS, LK_VIRTUAL, PD_DECODE } from "../data/decode.js";
import { barBox, laneAtY, rowAtY } from "../data/layout.js";
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
 * @property {number} axisH height of the time axis at the top
 * @property {number} scrollTop vertical scroll of the rows (content px)
 * @property {number} t0 visible window start (s)
 * @property {number} t1 visible window end (s)
 */

/** Px within which events are clustered into one marker. */
export const CLUSTER_PX = 8;

/** @param {Geo} g @returns {TimeScale} */
export function scaleOf(g) {
  return { t0: g.t0, t1: g.t1, pxPerSec: g.plotW / Math.max(g.t1 - g.t0, 1e-12), x0: g.plotX };
}
/** @param {Geo} g @param {number} t */
export const xOf = (g, t) => g.plotX + ((t - g.t0) * g.plotW) / Math.max(g.t1 - g.t0, 1e-12);
/** @param {Geo} g @param {number} x */
export const timeAt = (g, x) => g.t0 + ((x - g.plotX) * (g.t1 - g.t0)) / Math.max(g.plotW, 1);
/** Content y (row space) of a canvas y. @param {Geo} g @param {number} y */
export const contentY = (g, y) => y - g.axisH + g.scrollTop;
/** Canvas y of a content y. @param {Geo} g @param {number} cy */
export const canvasY = (g, cy) => cy - g.scrollTop + g.axisH;

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
  const k = dpr > 0 ? dpr : 1;
  return { x: px / k, y: py / k };
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
  const r = Math.max(2.5, Math.min(4, box.h * 0.24));
  // Markers ride along the top edge of the bar, leaving its body readable.
  return { cy: box.y + Math.min(r + 1, box.h / 2), r };
}

/**
 * Canvas box (CSS px, unclipped) of a span as drawn; null when its row is
 * filtered out or the span is never drawn (PD detail).
 * @param {Data} d
 * @param {Layout} L
 * @param {Geo} g
 * @param {number} i span index
 * @returns {{x: number, y: number, w: number, h: number}|null}
 */
export function spanBox(d, L, g, i) {
  if (i < 0 || i >= d.nSpans) return null;
  const r = L.rowOfSample[d.spanSample[i]] ?? -1;
  if (r < 0 || d.spanFlags[i] & F_PD_DETAIL) return null;
  const ex = !!L.expanded[r];
  let box = barBox(L, r, ex ? d.spanLane[i] : 0);
  if (!ex && d.spanFlags[i] & F_VIRTUAL) box = pdBand(box, d.spanPd[i]);
  const s = d.spanStart[i];
  let e = d.spanEnd[i];
  if (!(e >= s)) e = s;
  const x0 = xOf(g, s);
  const x1 = xOf(g, e);
  return { x: x0, y: canvasY(g, box.y), w: Math.max(1, x1 - x0), h: box.h };
}

/**
 * Canvas box of a PD segment.
 * @param {Data} d
 * @param {Layout} L
 * @param {Geo} g
 * @param {number} seg
 */
export function segmentBox(d, L, g, seg) {
  const b = spanBox(d, L, g, d.segSpan[seg]);
  if (!b) return null;
  const x0 = xOf(g, d.segStart[seg]);
  const x1 = xOf(g, d.segEnd[seg]);
  return { x: x0, y: b.y, w: Math.max(1, x1 - x0), h: b.h };
}

/**
 * Canvas box around an event marker.
 * @param {Data} d
 * @param {Layout} L
 * @param {Geo} g
 * @param {number} ev
 */
export function eventBox(d, L, g, ev) {
  if (ev < 0 || ev >= d.nEvents) return null;
  const r = L.rowOfSample[d.evSample[ev]] ?? -1;
  if (r < 0) return null;
  const box = barBox(L, r, L.expanded[r] ? d.evLane[ev] : 0);
  const m = markerGeom(box);
  const x = xOf(g, d.evTs[ev]);
  return { x: x - m.r, y: canvasY(g, m.cy) - m.r, w: 2 * m.r, h: 2 * m.r };
}

/**
 * Canvas box of a hit item (span, segment, event).
 * @param {Data} d
 * @param {Layout} L
 * @param {Geo} g
 * @param {Hit|null} h
 */
export function hitBox(d, L, g, h) {
  if (!h) return null;
  if (h.type === "span") return spanBox(d, L, g, h.span);
  if (h.type === "segment") return segmentBox(d, L, g, h.seg);
  if (h.type === "event") return eventBox(d, L, g, h.ev);
  return null;
}

/**
 * Lane slots a row shows at `lane` (-1 = all lanes: collapsed row).
 * @param {Data} d
 * @param {number} s
 * @param {number} lane
 * @returns {[number, number]} [first slot, end slot)
 */
export function laneSlots(d, s, lane) {
  const base = d.laneBase[s];
  if (lane < 0) return [base, base + d.nLanes[s]];
  return [base + lane, base + lane + 1];
}

/**
 * Gather the visible events of one kind in a row (all lanes when collapsed,
 * one lane when expanded), sorted by x, and cluster them.
 * @param {Data} d
 * @param {number} s sample
 * @param {number} lane -1 for all lanes
 * @param {TimeScale} sc
 * @param {Uint8Array} evVis
 * @param {number} kind EV_INSTANT or EV_UNMATCHED
 * @param {EventScratch} scratch
 * @param {ClusterBuffer} out
 */
export function rowEventClusters(d, s, lane, sc, evVis, kind, scratch, out) {
  scratch.reset();
  out.reset();
  const [a, b] = laneSlots(d, s, lane);
  const keep = (/** @type {number} */ i) => evVis[i] !== 0 && d.evKind[i] === kind;
  let lanesUsed = 0;
  for (let k = a; k < b; k++) {
    const lo = d.laneEvOff[k];
    const hi = d.laneEvOff[k + 1];
    if (hi <= lo) continue;
    const before = scratch.n;
    gatherEvents(d.evTs, lo, hi, sc, CLUSTER_PX * 2, keep, scratch);
    if (scratch.n > before) lanesUsed++;
  }
  if (lanesUsed > 1) scratch.sort();
  clusterSorted(scratch.xs, scratch.ids, scratch.n, CLUSTER_PX, out);
}

/**
 * Best span of lane slot k at time t (± tol): exact containment first, then
 * the nearest edge; ties go to the shorter span.
 * @param {Data} d
 * @param {number} k lane slot
 * @param {Uint8Array} vis
 * @param {number} t
 * @param {number} tol seconds
 * @returns {{i: number, err: number}}
 */
export function spanInLane(d, k, vis, t, tol) {
  const lo = d.laneSpanOff[k];
  const hi = d.laneSpanOff[k + 1];
  let best = -1;
  let bestErr = Infinity;
  let bestDur = Infinity;
  for (let i = firstReaching(d.spanEndMax, lo, hi, t - tol); i < hi; i++) {
    const s = d.spanStart[i];
    if (s > t + tol) break;
    if (vis[i] === 0) continue;
    let e = d.spanEnd[i];
    if (!(e >= s)) e = s;
    const err = t < s ? s - t : t > e ? t - e : 0;
    if (err > tol) continue;
    const dur = e - s;
    if (err < bestErr || (err === bestErr && dur < bestDur)) {
      best = i;
      bestErr = err;
      bestDur = dur;
    }
  }
  return { i: best, err: bestErr };
}

/**
 * Segment of virtual span v at time t (± tol), or -1.
 * @param {Data} d
 * @param {number} v
 * @param {number} t
 * @param {number} tol
 */
export function segmentAt(d, v, t, tol) {
  let best = -1;
  let bestErr = Infinity;
  for (let k = d.spanSegOff[v]; k < d.spanSegOff[v + 1]; k++) {
    const g = d.segOrder[k];
    const a = d.segStart[g];
    const b = d.segEnd[g];
    const err = t < a ? a - t : t > b ? t - b : 0;
    if (err <= tol && err < bestErr) {
      best = g;
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

const scratch = new EventScratch(256);
const clusters = new ClusterBuffer(256);

/**
 * What is under canvas point (x, y)?
 * @param {Data} d
 * @param {Layout} L
 * @param {Geo} g
 * @param {Uint8Array} vis span visibility
 * @param {Uint8Array} evVis event visibility
 * @param {number} x CSS px
 * @param {number} y CSS px
 * @returns {Hit|null}
 */
export function hitTest(d, L, g, vis, evVis, x, y) {
  if (y < 0 || x < 0 || x > g.width || y > g.height) return null;
  if (y < g.axisH) return { type: "axis", t: timeAt(g, x) };
  const cy = contentY(g, y);
  const r = rowAtY(L, cy);
  if (r < 0) return null;
  const s = L.rows[r];
  if (x < g.gutter) return { type: "label", row: r, sample: s };
  const t = timeAt(g, x);
  const rowHit = /** @type {Hit} */ ({ type: "row", row: r, sample: s, t });
  if (x < g.plotX || x > g.plotX + g.plotW) return rowHit;
  const expanded = !!L.expanded[r];
  const lane = expanded ? laneAtY(d, L, r, cy) : -1;
  const box = barBox(L, r, Math.max(lane, 0));
  if (cy < box.y - 1 || cy > box.y + box.h + 1) return rowHit;
  const sc = scaleOf(g);

  // Event markers are drawn on top: test them first.
  const mg = markerGeom(box);
  if (Math.abs(cy - mg.cy) <= mg.r + 1.5) {
    /** @type {Hit|null} */
    let bestEv = null;
    let bestDx = Infinity;
    for (const kind of [EV_UNMATCHED, EV_INSTANT]) {
      rowEventClusters(d, s, lane, sc, evVis, kind, scratch, clusters);
      for (let c = 0; c < clusters.n; c++) {
        const dx = Math.abs(clusters.x[c] - x);
        if (dx <= mg.r + 2 && dx < bestDx) {
          // Members: the gathered ids from the cluster's first id on.
          let start = 0;
          while (start < scratch.n && scratch.ids[start] !== clusters.first[c]) start++;
          const members = Array.from(scratch.ids.subarray(start, start + clusters.count[c]));
          bestDx = dx;
          bestEv = { type: "event", row: r, sample: s, ev: clusters.first[c], count: clusters.count[c], members, t };
        }
      }
    }
    if (bestEv) return bestEv;
  }

  const tol = 2 / sc.pxPerSec;
  const [a, b] = laneSlots(d, s, lane);

  // PD phases: lanes in an expanded row, a thin band in a collapsed one.
  for (let k = a; k < b; k++) {
    if (!(d.laneKind[k] & LK_VIRTUAL)) continue;
    const { i } = spanInLane(d, k, vis, t, tol);
    if (i < 0 || !(d.spanFlags[i] & F_VIRTUAL)) continue;
    if (!expanded) {
      const band = pdBand(box, d.spanPd[i]);
      if (cy < band.y - 0.5 || cy > band.y + band.h + 0.5) continue;
    }
    const seg = segmentAt(d, i, t, tol);
    if (seg >= 0) return { type: "segment", row: r, sample: s, span: i, seg, t };
    return { type: "span", row: r, sample: s, span: i, t };
  }

  // Ordinary spans: in a collapsed row the deepest one wins (drawn on top).
  let best = -1;
  let bestErr = Infinity;
  let bestDepth = -1;
  for (let k = a; k < b; k++) {
    if (!(d.laneKind[k] & LK_SPANS)) continue;
    const { i, err } = spanInLane(d, k, vis, t, tol);
    if (i < 0 || d.spanFlags[i] & F_VIRTUAL) continue;
    const depth = d.spanDepth[i];
    const better = (err === 0 ? 0 : 1) < (bestErr === 0 ? 0 : 1) || ((err === 0) === (bestErr === 0) && (depth > bestDepth || (depth === bestDepth && err < bestErr)));
    if (best < 0 || better) {
      best = i;
      bestErr = err;
      bestDepth = depth;
    }
  }
  if (best >= 0) return { type: "span", row: r, sample: s, span: best, t };
  return rowHit;
}
