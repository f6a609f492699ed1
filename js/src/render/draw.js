// One frame of the timeline, as passes in drawing order: the rows (their
// backgrounds and the time grid), then, clipped to the plot, the bars
// (bars.js), the engine band of collapsed rows (band.js), the events
// (event_marks.js) and the overlays (90%-finished lines, brush, hover,
// selection, cursor); last the margins: label gutter, load tracks, time axis.
// Only visible rows and the visible time window are touched. Box geometry
// (what is drawn where) lives in hit.js.

import { sizeCanvas } from "./canvas.js";
import { paintGutter, paintAxis } from "./margins.js";
import { rowFill } from "./fate_rows.js";
import { paintFinishLines } from "./finish_marker.js";
import { BandPainter } from "./band.js";
import { BarPass } from "./bars.js";
import { EventMarks } from "./event_marks.js";
import { paintTracks } from "./tracks.js";
import { visibleRows } from "../data/layout.js";
import { RunBuffer } from "./lod.js";
import { scaleOf, xOf, canvasY, hitBox } from "./hit.js";
import { niceStep } from "../util/format.js";
import { tickTimes } from "./axis_labels.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../data/layout.js").Layout} Layout */
/** @typedef {import("./hit.js").Geo} Geo */
/** @typedef {import("./hit.js").Hit} Hit */
/** @typedef {import("../ui/theme.js").Theme} Theme */
/** @typedef {import("./colors.js").ColorTable} ColorTable */

/**
 * @typedef {Object} Scene
 * @property {Data} d
 * @property {Layout} L
 * @property {Geo} g
 * @property {Uint8Array} vis
 * @property {Uint8Array} evVis
 * @property {Theme} theme
 * @property {ColorTable} colors
 * @property {number} cursor NaN for none
 * @property {[number, number]|null} brush
 * @property {Hit|null} selection
 * @property {Hit|null} hover
 * @property {number} hoverRow -1 for none
 * @property {number} selRow -1 for none
 * @property {boolean} raiseShown draw undimmed spans of collapsed rows on top (legend highlight)
 * @property {boolean} loadSplit the load tracks one per engine (else summed)
 * @property {import("./fate_rows.js").FateFills|null} [fates] rows coloured by fate (fate_rows.js), null: by span
 */

export class Painter {
  /** @param {HTMLCanvasElement} canvas */
  constructor(canvas) {
    this.canvas = canvas;
    const ctx = canvas.getContext("2d", { alpha: false });
    if (!ctx) throw new Error("canvas 2d context unavailable");
    this.ctx = ctx;
    this.w = 0;
    this.h = 0;
    this.dpr = 1;
    this.runs = new RunBuffer(4096);
    this.bars = new BarPass(this.runs);
    this.events = new EventMarks();
    /** @type {Map<string, Map<number, number>>} */
    this.widthCache = new Map();
    this.drawnRows = 0;
    this.band = new BandPainter();
    /** @type {import("../data/fates.js").PlacedMarker[]} the 90%-finished markers of the last frame (finish_marker.js) */
    this.finishPlaced = [];
  }

  /**
   * Size the backing store to CSS size × devicePixelRatio.
   * @param {number} width
   * @param {number} height
   * @param {number} dpr
   */
  resize(width, height, dpr) {
    sizeCanvas(this.canvas, width, height, dpr);
    this.w = width;
    this.h = height;
    this.dpr = dpr;
  }

  /**
   * Text width with a per-font cache keyed by string.
   * @param {string} font
   * @param {string} text
   */
  textWidth(font, text) {
    let widths = this.widthCache.get(font);
    if (!widths) {
      widths = new Map();
      this.widthCache.set(font, widths);
    }
    let width = widths.get(/** @type {any} */ (text));
    if (width === undefined) {
      this.ctx.font = font;
      width = this.ctx.measureText(text).width;
      if (widths.size > 5000) widths.clear();
      widths.set(/** @type {any} */ (text), width);
    }
    return width;
  }

  /**
   * `text` cut with an ellipsis to fit `maxW` px (binary search on length).
   * @param {string} font
   * @param {string} text
   * @param {number} maxW
   */
  fit(font, text, maxW) {
    if (maxW <= 4) return "";
    // No glyph is narrower than ~1 px at label sizes: a longer prefix can never
    // fit, and measuring (and caching) a multi-MB name would stall the frame.
    const longest = Math.ceil(maxW) + 1;
    if (text.length > longest) text = text.slice(0, longest);
    if (this.textWidth(font, text) <= maxW) return text;
    let lo = 0;
    let hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.textWidth(font, text.slice(0, mid) + "…") <= maxW) lo = mid;
      else hi = mid - 1;
    }
    // A label cut to one or two letters says nothing: leave the bar bare.
    return lo < 3 ? "" : text.slice(0, lo) + "…";
  }

  /** Clear the font-width cache (theme/font change). */
  resetTextCache() {
    this.widthCache.clear();
  }

  /**
   * Paint one frame.
   * @param {Scene} scene
   * @returns {number} rows painted
   */
  paint(scene) {
    const { ctx } = this;
    const { L: layout, g: geometry, theme } = scene;
    const width = this.w;
    const height = this.h;
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.fillStyle = theme.bg;
    ctx.fillRect(0, 0, width, height);

    const rowsTop = geometry.axisH;
    const rowsH = height - geometry.axisH;
    const [r0, r1] = visibleRows(layout, geometry.scrollTop, rowsH);
    this.drawnRows = r1 - r0;
    const sc = scaleOf(geometry);
    const step = niceStep(sc.pxPerSec, 96);
    const firstTick = Math.ceil(geometry.t0 / step) * step;

    paintRows(ctx, scene, r0, r1, width, height, step, firstTick);

    // The plot's passes, clipped to it.
    ctx.save();
    ctx.beginPath();
    ctx.rect(geometry.plotX, rowsTop, geometry.plotW, rowsH);
    ctx.clip();
    this.bars.paint(ctx, this, scene, r0, r1, sc);
    this.band.paint(ctx, scene, r0, r1, sc, this.runs);
    this.events.paint(ctx, this, scene, r0, r1, sc);
    this.paintOverlays(scene);
    ctx.restore();

    paintGutter(this, scene, r0, r1);
    paintTracks(this, scene, step, firstTick);
    paintAxis(this, scene, step, firstTick);
    return this.drawnRows;
  }

  /**
   * Brush range, cursor, hover and selection outlines.
   * @param {Scene} scene
   */
  paintOverlays(scene) {
    const { ctx } = this;
    const { d: data, L: layout, g: geometry, theme } = scene;
    const top = geometry.axisH;
    const height = this.h;
    paintFinishLines(this, scene);
    if (scene.brush) {
      const left = xOf(geometry, Math.min(scene.brush[0], scene.brush[1]));
      const right = xOf(geometry, Math.max(scene.brush[0], scene.brush[1]));
      ctx.fillStyle = theme.brand;
      ctx.globalAlpha = 0.12;
      ctx.fillRect(left, top, Math.max(1, right - left), height - top);
      ctx.globalAlpha = 0.9;
      ctx.fillRect(Math.round(left), top, 1, height - top);
      ctx.fillRect(Math.round(right), top, 1, height - top);
      ctx.globalAlpha = 1;
    }
    const hov = hitBox(data, layout, geometry, scene.hover);
    if (hov) {
      ctx.strokeStyle = theme.fg1;
      ctx.lineWidth = 1;
      ctx.strokeRect(Math.round(hov.x) - 0.5, Math.round(hov.y) - 0.5, Math.max(1, Math.round(hov.w)) + 1, Math.round(hov.h) + 1);
    }
    const sel = hitBox(data, layout, geometry, scene.selection);
    if (sel) {
      ctx.strokeStyle = theme.fg0;
      ctx.lineWidth = 2;
      ctx.strokeRect(Math.round(sel.x) - 1, Math.round(sel.y) - 1, Math.max(1, Math.round(sel.w)) + 2, Math.round(sel.h) + 2);
      ctx.strokeStyle = theme.brand;
      ctx.lineWidth = 1;
      ctx.strokeRect(Math.round(sel.x) - 2.5, Math.round(sel.y) - 2.5, Math.max(1, Math.round(sel.w)) + 5, Math.round(sel.h) + 5);
    }
    if (Number.isFinite(scene.cursor)) {
      const x = Math.round(xOf(geometry, scene.cursor)) + 0.5;
      ctx.strokeStyle = theme.cursor;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x, top);
      ctx.lineTo(x, height);
      ctx.stroke();
    }
  }
}

/**
 * The rows pass: each row's background (by selection, hover, fate) and the
 * time grid's lines, clipped below the axis.
 * @param {CanvasRenderingContext2D} ctx
 * @param {Scene} scene
 * @param {number} r0
 * @param {number} r1
 * @param {number} width
 * @param {number} height
 * @param {number} step seconds between grid lines
 * @param {number} firstTick
 */
function paintRows(ctx, scene, r0, r1, width, height, step, firstTick) {
  const { L: layout, g: geometry, theme } = scene;
  const rowsTop = geometry.axisH;
  ctx.save();
  ctx.beginPath();
  ctx.rect(0, rowsTop, width, height - rowsTop);
  ctx.clip();
  for (let row = r0; row < r1; row++) {
    const bg = rowFill(scene, row);
    if (!bg) continue;
    ctx.fillStyle = bg;
    ctx.fillRect(0, canvasY(geometry, layout.rowTop[row]), width, layout.rowTop[row + 1] - layout.rowTop[row]);
  }
  ctx.strokeStyle = theme.border2;
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (const tick of tickTimes(firstTick, step, geometry.t1)) {
    const x = Math.round(xOf(geometry, tick)) + 0.5;
    ctx.moveTo(x, rowsTop);
    ctx.lineTo(x, height);
  }
  ctx.stroke();
  ctx.restore();
}
