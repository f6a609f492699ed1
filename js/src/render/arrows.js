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
 * @param {Data} d
 * @param {Layout} L
 * @param {Geo} g
 * @param {Uint8Array} vis
 * @param {Uint8Array} evVis
 * @param {End} end
 */
export function anchor(d, L, g, vis, evVis, end) {
  if (end.kind === "event") {
    if (evVis[end.index] === HIDDEN) return null;
    const b = eventBox(d, L, g, end.index);
    return b && { x: b.x + b.w / 2, y: b.y + b.h / 2 };
  }
  if (vis[end.index] === HIDDEN) return null;
  const b = spanBox(d, L, g, end.index);
  if (!b) return null;
  const left = Math.max(b.x, g.plotX);
  const right = Math.min(b.x + b.w, g.plotX + g.plotW);
  const x = right > left ? left + Math.min(4, (right - left) / 2) : b.x;
  return { x, y: b.y + b.h / 2 };
}

/**
 * Cut segment a -> b to the rectangle (Liang-Barsky); null when it misses it.
 * @param {{x: number, y: number}} a
 * @param {{x: number, y: number}} b
 * @param {{x0: number, y0: number, x1: number, y1: number}} r
 * @returns {[number, number]|null} parameters [t0, t1] of the visible part
 */
export function clipSegment(a, b, r) {
  const dx = b.x - a.x;
  const dy = b.y - a.y;
  let t0 = 0;
  let t1 = 1;
  const sides = [
    [-dx, a.x - r.x0],
    [dx, r.x1 - a.x],
    [-dy, a.y - r.y0],
    [dy, r.y1 - a.y],
  ];
  for (const [p, q] of sides) {
    if (p === 0) {
      if (q < 0) return null;
      continue;
    }
    const t = q / p;
    if (p < 0) t0 = Math.max(t0, t);
    else t1 = Math.min(t1, t);
    if (t0 > t1) return null;
  }
  return [t0, t1];
}

/**
 * The arrows of the selection's links, as they fall on the plot.
 * @param {Data} d
 * @param {Layout} L
 * @param {Geo} g
 * @param {Uint8Array} vis
 * @param {Uint8Array} evVis
 * @param {Hit|null} selection
 * @returns {Arrow[]}
 */
export function arrowsFor(d, L, g, vis, evVis, selection) {
  const self = endOfHit(selection);
  if (!self) return [];
  const rect = { x0: g.plotX, y0: g.axisH, x1: g.plotX + g.plotW, y1: g.height };
  /** @type {Arrow[]} */
  const out = [];
  for (const link of linksOf(d, self.kind, self.index)) {
    const a = anchor(d, L, g, vis, evVis, link.from);
    const b = anchor(d, L, g, vis, evVis, link.to);
    if (!a || !b) continue;
    const t = clipSegment(a, b, rect);
    if (!t) continue;
    const [t0, t1] = t;
    out.push({
      kind: link.kind,
      from: link.from,
      to: link.to,
      x0: a.x + (b.x - a.x) * t0,
      y0: a.y + (b.y - a.y) * t0,
      x1: a.x + (b.x - a.x) * t1,
      y1: a.y + (b.y - a.y) * t1,
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
 * @param {Geo} g
 * @param {Theme} theme
 * @param {Arrow[]} arrows
 */
export function paintArrows(ctx, dpr, g, theme, arrows) {
  if (!arrows.length) return;
  ctx.save();
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.beginPath();
  ctx.rect(g.plotX, g.axisH, g.plotW, g.height - g.axisH);
  ctx.clip();
  ctx.lineWidth = 1.5;
  ctx.font = `11px ${theme.font}`;
  ctx.textBaseline = "bottom";
  const labelled = new Set();
  for (const a of arrows) {
    const color = (LINK_COLORS[a.kind] || [theme.fg1, theme.fg1])[theme.dark ? 1 : 0];
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.setLineDash(a.cutTo ? [5, 3] : []);
    ctx.beginPath();
    ctx.moveTo(a.x0, a.y0);
    ctx.lineTo(a.x1, a.y1);
    ctx.stroke();
    ctx.setLineDash([]);
    if (!a.cutFrom) {
      ctx.beginPath();
      ctx.arc(a.x0, a.y0, 2.5, 0, 2 * Math.PI);
      ctx.fill();
    }
    const angle = Math.atan2(a.y1 - a.y0, a.x1 - a.x0);
    ctx.beginPath();
    ctx.moveTo(a.x1, a.y1);
    ctx.lineTo(a.x1 - 8 * Math.cos(angle - 0.45), a.y1 - 8 * Math.sin(angle - 0.45));
    ctx.lineTo(a.x1 - 8 * Math.cos(angle + 0.45), a.y1 - 8 * Math.sin(angle + 0.45));
    ctx.closePath();
    ctx.fill();
    if (!labelled.has(a.kind)) {
      labelled.add(a.kind);
      ctx.fillText(a.kind, (a.x0 + a.x1) / 2 + 4, (a.y0 + a.y1) / 2 - 2);
    }
  }
  ctx.restore();
}
