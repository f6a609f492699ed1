// Overview strip: active-sample count over the whole dump as an area chart
// (histogram computed once per filter change), the current view window on
// top; drag the window to pan, click elsewhere to centre the view there.

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../ui/theme.js").Theme} Theme */

import { sizeCanvas } from "../render/canvas.js";
import { formatNumber } from "../util/format.js";

/**
 * Samples active in each of `bins` equal bins over [lo, hi]: a sample counts
 * in every bin its [start, end] touches. Difference array: O(rows + bins).
 * @param {Data} data
 * @param {ArrayLike<number>} rows
 * @param {number} lo
 * @param {number} hi
 * @param {number} bins
 * @returns {Float32Array}
 */
export function activeHistogram(data, rows, lo, hi, bins) {
  const diff = new Float64Array(bins + 1);
  const scale = bins / Math.max(hi - lo, 1e-12);
  for (let rowIndex = 0; rowIndex < rows.length; rowIndex++) {
    const sample = rows[rowIndex];
    const start = data.smpStart[sample];
    let end = data.smpEnd[sample];
    if (Number.isNaN(start)) continue;
    if (!(end >= start)) end = start;
    if (end < lo || start > hi) continue;
    const i0 = Math.max(0, Math.min(bins - 1, Math.floor((start - lo) * scale)));
    const i1 = Math.max(0, Math.min(bins - 1, Math.floor((end - lo) * scale)));
    diff[i0] += 1;
    diff[i1 + 1] -= 1;
  }
  const out = new Float32Array(bins);
  let acc = 0;
  for (let i = 0; i < bins; i++) {
    acc += diff[i];
    out[i] = acc;
  }
  return out;
}

/**
 * @typedef {Object} OverviewHost
 * @property {() => {t0: number, t1: number}} view
 * @property {(t0: number, t1: number) => void} setView
 * @property {() => {plotX: number, plotW: number}} plot
 */

export class Overview {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {OverviewHost} host
   */
  constructor(canvas, host) {
    this.canvas = canvas;
    const ctx = canvas.getContext("2d");
    if (!ctx) throw new Error("canvas 2d context unavailable");
    this.ctx = ctx;
    this.host = host;
    /** @type {Float32Array} */
    this.hist = new Float32Array(0);
    this.lo = 0;
    this.hi = 1;
    this.w = 0;
    this.h = 0;
    this.dpr = 1;
    /** @type {{mode: "move"|"none", startX: number, t0: number, t1: number, moved: boolean}|null} */
    this.drag = null;
    this.onDown = this.onDown.bind(this);
    this.onMove = this.onMove.bind(this);
    this.onUp = this.onUp.bind(this);
    canvas.addEventListener("pointerdown", this.onDown);
    canvas.addEventListener("pointermove", this.onMove);
    canvas.addEventListener("pointerup", this.onUp);
    canvas.addEventListener("pointercancel", this.onUp);
  }

  dispose() {
    this.canvas.removeEventListener("pointerdown", this.onDown);
    this.canvas.removeEventListener("pointermove", this.onMove);
    this.canvas.removeEventListener("pointerup", this.onUp);
    this.canvas.removeEventListener("pointercancel", this.onUp);
  }

  /**
   * @param {Float32Array} hist
   * @param {number} lo
   * @param {number} hi
   */
  setData(hist, lo, hi) {
    this.hist = hist;
    this.lo = lo;
    this.hi = hi;
  }

  /**
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

  /** @param {number} time */
  x(time) {
    const { plotX, plotW } = this.host.plot();
    return plotX + ((time - this.lo) / Math.max(this.hi - this.lo, 1e-12)) * plotW;
  }

  /** @param {number} x */
  t(x) {
    const { plotX, plotW } = this.host.plot();
    return this.lo + ((x - plotX) / Math.max(plotW, 1)) * (this.hi - this.lo);
  }

  /**
   * @param {Theme} theme
   * @param {number} cursor
   */
  paint(theme, cursor) {
    const { ctx, w: width, h: height } = this;
    const { plotX, plotW } = this.host.plot();
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.fillStyle = theme.bg1;
    ctx.fillRect(0, 0, width, height);
    let max = 0;
    for (let i = 0; i < this.hist.length; i++) if (this.hist[i] > max) max = this.hist[i];
    ctx.font = `10px ${theme.font}`;
    ctx.textBaseline = "top";
    ctx.fillStyle = theme.fg2;
    ctx.fillText("active samples", 8, 4);
    ctx.fillText(`peak ${formatNumber(max)}`, 8, 17);
    const top = 3;
    const bottom = height - 3;
    const bins = this.hist.length;
    if (bins > 0 && max > 0) {
      ctx.beginPath();
      ctx.moveTo(plotX, bottom);
      for (let i = 0; i < bins; i++) {
        const x0 = plotX + (i / bins) * plotW;
        const x1 = plotX + ((i + 1) / bins) * plotW;
        const y = bottom - (this.hist[i] / max) * (bottom - top);
        ctx.lineTo(x0, y);
        ctx.lineTo(x1, y);
      }
      ctx.lineTo(plotX + plotW, bottom);
      ctx.closePath();
      ctx.fillStyle = theme.brand;
      ctx.globalAlpha = 0.28;
      ctx.fill();
      ctx.globalAlpha = 0.8;
      ctx.strokeStyle = theme.brand;
      ctx.lineWidth = 1;
      ctx.stroke();
      ctx.globalAlpha = 1;
    }
    // View window: shade outside it, outline it.
    const view = this.host.view();
    const left = Math.max(plotX, Math.min(plotX + plotW, this.x(view.t0)));
    const right = Math.max(plotX, Math.min(plotX + plotW, this.x(view.t1)));
    ctx.fillStyle = theme.dark ? "rgba(0,0,0,0.45)" : "rgba(0,0,0,0.10)";
    ctx.fillRect(plotX, 0, Math.max(0, left - plotX), height);
    ctx.fillRect(right, 0, Math.max(0, plotX + plotW - right), height);
    ctx.strokeStyle = theme.fg1;
    ctx.lineWidth = 1.5;
    const ww = Math.max(3, right - left);
    ctx.strokeRect(Math.round(left) + 0.75, 1.5, ww - 1.5, height - 3);
    if (Number.isFinite(cursor)) {
      const x = Math.round(this.x(cursor)) + 0.5;
      ctx.strokeStyle = theme.cursor;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x, 0);
      ctx.lineTo(x, height);
      ctx.stroke();
    }
    ctx.fillStyle = theme.border1;
    ctx.fillRect(0, height - 1, width, 1);
  }

  /** @param {PointerEvent} event */
  onDown(event) {
    if (event.button !== 0) return;
    const rect = this.canvas.getBoundingClientRect();
    const x = event.clientX - rect.left;
    const view = this.host.view();
    const left = this.x(view.t0);
    const right = this.x(view.t1);
    const inside = x >= Math.min(left, right - 3) - 3 && x <= Math.max(right, left + 3) + 3;
    this.drag = { mode: inside ? "move" : "none", startX: x, t0: view.t0, t1: view.t1, moved: false };
    try {
      this.canvas.setPointerCapture(event.pointerId);
    } catch {
      /* capture is a nicety */
    }
    event.preventDefault();
  }

  /** @param {PointerEvent} event */
  onMove(event) {
    const rect = this.canvas.getBoundingClientRect();
    const x = event.clientX - rect.left;
    const view = this.host.view();
    const left = this.x(view.t0);
    const right = this.x(view.t1);
    this.canvas.style.cursor = x >= left - 3 && x <= right + 3 ? "grab" : "pointer";
    if (!this.drag) return;
    if (Math.abs(x - this.drag.startX) > 2) this.drag.moved = true;
    if (this.drag.mode === "move" && this.drag.moved) {
      const dt = this.t(x) - this.t(this.drag.startX);
      this.host.setView(this.drag.t0 + dt, this.drag.t1 + dt);
      this.canvas.style.cursor = "grabbing";
    }
  }

  /** @param {PointerEvent} event */
  onUp(event) {
    const dr = this.drag;
    this.drag = null;
    if (!dr) return;
    if (!dr.moved) {
      // Click: centre the view window at the clicked time.
      const rect = this.canvas.getBoundingClientRect();
      const time = this.t(event.clientX - rect.left);
      const half = (dr.t1 - dr.t0) / 2;
      this.host.setView(time - half, time + half);
    }
  }
}
