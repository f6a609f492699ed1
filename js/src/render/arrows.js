// Arrows for the links of the selected span or event (links.js), painted over
// the timeline after the rows. Ends use the boxes of hit.js: a span's left end
// (or where it enters the plot), an event's marker. An arrow whose end lies off
// the plot (scrolled or zoomed away) is cut at the plot's edge, so a stub still
// points the way. Ends in hidden rows or hidden by a filter draw nothing.

import { spanBox, eventBox } from "./hit.js";
import { linksOf, endOfHit } from "../data/links.js";
import { HIDDEN } from "../data/filters.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../data/layout.js").Layout} Layout */
/** @typedef {import("./hit.js").Geo} Geo */
/** @typedef {import("./hit.js").Hit} Hit */
/** @typedef {import("../ui/theme.js").Theme} Theme */
/** @typedef {import("../data/links.js").End} End */

/** Stroke colour per link kind, light and dark. @type {Record<string, [string, string]>} */
export const LINK_COLORS = {
  group: ["#7c3aed", "#c4b5fd"],
  attempt: ["#c2410c", "#fdba74"],
  remote: ["#0e7490", "#67e8f9"],
};

/**
 * @typedef {Object} Arrow
 * @property {string} kind
 * @property {End} from
 * @property {End} to
 * @property {number} x0 visible start (canvas CSS px)
 * @property {number} y0
 * @property {number} x1 visible end
 * @property {number} y1
 * @property {boolean} cutFrom the start lies off the plot
 * @property {boolean} cutTo the end lies off the plot
 */

/**
 * Where an arrow meets an item; null when the item is not laid out or hidden.
 * @param {Data} data
 * @param {Layout} layout
 * @param {Geo} geometry
 * @param {Uint8Array} vis
 * @param {Uint8Array} evVis
 * @param {End} end
 */
export function anchor(data, layout, geometry, vis, evVis, end) {
  if (end.kind === "event") {
    if (evVis[end.index] === HIDDEN) return null;
    const box = eventBox(data, layout, geometry, end.index);
    return box && { x: box.x + box.w / 2, y: box.y + box.h / 2 };
  }
  if (vis[end.index] === HIDDEN) return null;
  const box = spanBox(data, layout, geometry, end.index);
  if (!box) return null;
  const left = Math.max(box.x, geometry.plotX);
  const right = Math.min(box.x + box.w, geometry.plotX + geometry.plotW);
  const x = right > left ? left + Math.min(4, (right - left) / 2) : box.x;
  return { x, y: box.y + box.h / 2 };
}

/**
 * Cut segment start -> end to the rectangle (Liang-Barsky); null when it misses it.
 * @param {{x: number, y: number}} start
 * @param {{x: number, y: number}} end
 * @param {{x0: number, y0: number, x1: number, y1: number}} rect
 * @returns {[number, number]|null} parameters [t0, t1] of the visible part
 */
export function clipSegment(start, end, rect) {
  const dx = end.x - start.x;
  const dy = end.y - start.y;
  let t0 = 0;
  let t1 = 1;
  const sides = [
    [-dx, start.x - rect.x0],
    [dx, rect.x1 - start.x],
    [-dy, start.y - rect.y0],
    [dy, rect.y1 - start.y],
  ];
  for (const [direction, distance] of sides) {
    if (direction === 0) {
      if (distance < 0) return null;
      continue;
    }
    const crossing = distance / direction;
    if (direction < 0) t0 = Math.max(t0, crossing);
    else t1 = Math.min(t1, crossing);
    if (t0 > t1) return null;
  }
  return [t0, t1];
}

/**
 * The arrows of the selection's links, as they fall on the plot.
 * @param {Data} data
 * @param {Layout} layout
 * @param {Geo} geometry
 * @param {Uint8Array} vis
 * @param {Uint8Array} evVis
 * @param {Hit|null} selection
 * @returns {Arrow[]}
 */
export function arrowsFor(data, layout, geometry, vis, evVis, selection) {
  const self = endOfHit(selection);
  if (!self) return [];
  const rect = { x0: geometry.plotX, y0: geometry.axisH, x1: geometry.plotX + geometry.plotW, y1: geometry.height };
  /** @type {Arrow[]} */
  const out = [];
  for (const link of linksOf(data, self.kind, self.index)) {
    const fromPoint = anchor(data, layout, geometry, vis, evVis, link.from);
    const toPoint = anchor(data, layout, geometry, vis, evVis, link.to);
    if (!fromPoint || !toPoint) continue;
    const visible = clipSegment(fromPoint, toPoint, rect);
    if (!visible) continue;
    const [t0, t1] = visible;
    out.push({
      kind: link.kind,
      from: link.from,
      to: link.to,
      x0: fromPoint.x + (toPoint.x - fromPoint.x) * t0,
      y0: fromPoint.y + (toPoint.y - fromPoint.y) * t0,
      x1: fromPoint.x + (toPoint.x - fromPoint.x) * t1,
      y1: fromPoint.y + (toPoint.y - fromPoint.y) * t1,
      cutFrom: t0 > 0,
      cutTo: t1 < 1,
    });
  }
  return out;
}

/**
 * Paint `arrows` on the timeline canvas: a line, a head at the end (or where it
 * leaves the plot), a dot at the start, one label per kind.
 * @param {CanvasRenderingContext2D} ctx
 * @param {number} dpr
 * @param {Geo} geometry
 * @param {Theme} theme
 * @param {Arrow[]} arrows
 */
export function paintArrows(ctx, dpr, geometry, theme, arrows) {
  if (!arrows.length) return;
  ctx.save();
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.beginPath();
  ctx.rect(geometry.plotX, geometry.axisH, geometry.plotW, geometry.height - geometry.axisH);
  ctx.clip();
  ctx.lineWidth = 1.5;
  ctx.font = `11px ${theme.font}`;
  ctx.textBaseline = "bottom";
  const labelled = new Set();
  for (const arrow of arrows) {
    const color = (LINK_COLORS[arrow.kind] || [theme.fg1, theme.fg1])[theme.dark ? 1 : 0];
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.setLineDash(arrow.cutTo ? [5, 3] : []);
    ctx.beginPath();
    ctx.moveTo(arrow.x0, arrow.y0);
    ctx.lineTo(arrow.x1, arrow.y1);
    ctx.stroke();
    ctx.setLineDash([]);
    if (!arrow.cutFrom) {
      ctx.beginPath();
      ctx.arc(arrow.x0, arrow.y0, 2.5, 0, 2 * Math.PI);
      ctx.fill();
    }
    const angle = Math.atan2(arrow.y1 - arrow.y0, arrow.x1 - arrow.x0);
    ctx.beginPath();
    ctx.moveTo(arrow.x1, arrow.y1);
    ctx.lineTo(arrow.x1 - 8 * Math.cos(angle - 0.45), arrow.y1 - 8 * Math.sin(angle - 0.45));
    ctx.lineTo(arrow.x1 - 8 * Math.cos(angle + 0.45), arrow.y1 - 8 * Math.sin(angle + 0.45));
    ctx.closePath();
    ctx.fill();
    if (!labelled.has(arrow.kind)) {
      labelled.add(arrow.kind);
      ctx.fillText(arrow.kind, (arrow.x0 + arrow.x1) / 2 + 4, (arrow.y0 + arrow.y1) / 2 - 2);
    }
  }
  ctx.restore();
}
