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
 * @param {Data} d
 * @param {ArrayLike<number>} rows
 * @param {number} lo
 * @param {number} hi
 * @param {number} bins
 * @returns {Float32Array}
 */
export function activeHistogram(d, rows, lo, hi, bins) {
  const diff = new Float64Array(bins + 1);
  const k = bins / Math.max(hi - lo, 1e-12);
  for (let r = 0; r < rows.length; r++) {
    const s = rows[r];
    const a = d.smpStart[s];
    let b = d.smpEnd[s];
    if (Number.isNaN(a)) continue;
    if (!(b >= a)) b = a;
    if (b < lo || a > hi) continue;
    const i0 = Math.max(0, Math.min(bins - 1, Math.floor((a - lo) * k)));
    const i1 = Math.max(0, Math.min(bins - 1, Math.floor((b - lo) * k)));
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
   * @param {number} w
   * @param {number} h
   * @param {number} dpr
   */
  resize(w, h, dpr) {
    sizeCanvas(this.canvas, w, h, dpr);
    this.w = w;
    this.h = h;
    this.dpr = dpr;
  }

  /** @param {number} t */
  x(t) {
    const { plotX, plotW } = this.host.plot();
    return plotX + ((t - this.lo) / Math.max(this.hi - this.lo, 1e-12)) * plotW;
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
    const { ctx, w, h } = this;
    const { plotX, plotW } = this.host.plot();
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.fillStyle = theme.bg1;
    ctx.fillRect(0, 0, w, h);
    let max = 0;
    for (let i = 0; i < this.hist.length; i++) if (this.hist[i] > max) max = this.hist[i];
    ctx.font = `10px ${theme.font}`;
    ctx.textBaseline = "top";
    ctx.fillStyle = theme.fg2;
    ctx.fillText("active samples", 8, 4);
    ctx.fillText(`peak ${formatNumber(max)}`, 8, 17);
    const top = 3;
    const bottom = h - 3;
    const n = this.hist.length;
    if (n > 0 && max > 0) {
      ctx.beginPath();
      ctx.moveTo(plotX, bottom);
      for (let i = 0; i < n; i++) {
        const x0 = plotX + (i / n) * plotW;
        const x1 = plotX + ((i + 1) / n) * plotW;
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
    const v = this.host.view();
    const a = Math.max(plotX, Math.min(plotX + plotW, this.x(v.t0)));
    const b = Math.max(plotX, Math.min(plotX + plotW, this.x(v.t1)));
    ctx.fillStyle = theme.dark ? "rgba(0,0,0,0.45)" : "rgba(0,0,0,0.10)";
    ctx.fillRect(plotX, 0, Math.max(0, a - plotX), h);
    ctx.fillRect(b, 0, Math.max(0, plotX + plotW - b), h);
    ctx.strokeStyle = theme.fg1;
    ctx.lineWidth = 1.5;
    const ww = Math.max(3, b - a);
    ctx.strokeRect(Math.round(a) + 0.75, 1.5, ww - 1.5, h - 3);
    if (Number.isFinite(cursor)) {
      const x = Math.round(this.x(cursor)) + 0.5;
      ctx.strokeStyle = theme.cursor;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x, 0);
      ctx.lineTo(x, h);
      ctx.stroke();
    }
    ctx.fillStyle = theme.border1;
    ctx.fillRect(0, h - 1, w, 1);
  }

  /** @param {PointerEvent} e */
  onDown(e) {
    if (e.button !== 0) return;
    const rect = this.canvas.getBoundingClientRect();
    const x = e.clientX - rect.left;
    const v = this.host.view();
    const a = this.x(v.t0);
    const b = this.x(v.t1);
    const inside = x >= Math.min(a, b - 3) - 3 && x <= Math.max(b, a + 3) + 3;
    this.drag = { mode: inside ? "move" : "none", startX: x, t0: v.t0, t1: v.t1, moved: false };
    try {
      this.canvas.setPointerCapture(e.pointerId);
    } catch {
      /* capture is a nicety */
    }
    e.preventDefault();
  }

  /** @param {PointerEvent} e */
  onMove(e) {
    const rect = this.canvas.getBoundingClientRect();
    const x = e.clientX - rect.left;
    const v = this.host.view();
    const a = this.x(v.t0);
    const b = this.x(v.t1);
    this.canvas.style.cursor = x >= a - 3 && x <= b + 3 ? "grab" : "pointer";
    if (!this.drag) return;
    if (Math.abs(x - this.drag.startX) > 2) this.drag.moved = true;
    if (this.drag.mode === "move" && this.drag.moved) {
      const dt = this.t(x) - this.t(this.drag.startX);
      this.host.setView(this.drag.t0 + dt, this.drag.t1 + dt);
      this.canvas.style.cursor = "grabbing";
    }
  }

  /** @param {PointerEvent} e */
  onUp(e) {
    const dr = this.drag;
    this.drag = null;
    if (!dr) return;
    if (!dr.moved) {
      // Click: centre the view window at the clicked time.
      const rect = this.canvas.getBoundingClientRect();
      const t = this.t(e.clientX - rect.left);
      const half = (dr.t1 - dr.t0) / 2;
      this.host.setView(t - half, t + half);
    }
  }
}
