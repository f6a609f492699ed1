// The flame view: an icicle of the flame table (flame.js) of the shown samples
// (rows after the filters, spans not hidden), or of the shift-drag range when
// there is one (spans clipped to it). Roots are laid side by side by total
// time, each frame's children inside it (scaled down when concurrent children
// add up to more than their parent). Clicking a frame focuses its spans in the
// timeline and reports it in `selected`; clicking it again or Esc clears.
// Nothing runs per timeline frame: the table is rebuilt only when its inputs
// change while the view is open, and the canvas redrawn on that, a resize or a hover.

import { flameOf } from "../data/flame.js";
import { measuredSpans } from "../data/critical.js";
import { spanVisibility, HIDDEN } from "../data/filters.js";
import { colorForName, textOn } from "../render/colors.js";
import { sizeCanvas } from "../render/canvas.js";
import { formatDuration, formatNumber } from "../util/format.js";
import { el } from "../util/dom.js";

/** @typedef {import("../data/flame.js").Flame} Flame */
/** @typedef {import("../data/flame.js").FlameRow} FlameRow */
/** @typedef {import("../ui/app.js").App} App */

export const ROW_H = 18;

/**
 * @typedef {Object} IcicleLayout
 * @property {Float64Array} x left edge of each table row's frame (CSS px)
 * @property {Float64Array} w its width (0: not drawn)
 * @property {number} depth frames stacked (the canvas is depth * ROW_H tall)
 */

/**
 * Frames of `rows` across `width` px: roots by total time, children inside
 * their parent by total time (scaled to fit when they overlap in time).
 * @param {FlameRow[]} rows the flame table (each row knows its parent row)
 * @param {number} width
 * @returns {IcicleLayout}
 */
export function icicleLayout(rows, width) {
  const n = rows.length;
  const x = new Float64Array(n);
  const w = new Float64Array(n);
  /** @type {number[][]} children of each row; the roots last */
  const kids = Array.from({ length: n + 1 }, () => /** @type {number[]} */ ([]));
  let depth = 0;
  rows.forEach((r, k) => kids[r.parent < 0 ? n : r.parent].push(k));
  // Sibling lists to place, each with its left edge, the px it may fill and its level:
  // a work list rather than recursion, so a path thousands of frames deep cannot
  // exhaust the stack.
  /** @type {[number[], number, number, number][]} */
  const todo = [[kids[n], 0, width, 0]];
  while (todo.length) {
    const [list, left, room, level] = /** @type {[number[], number, number, number]} */ (todo.pop());
    let sum = 0;
    for (const k of list) sum += Math.max(rows[k].total, 0);
    if (!(sum > 0)) continue;
    depth = Math.max(depth, level + 1);
    let cursor = left;
    for (const k of list) {
      x[k] = cursor;
      w[k] = (Math.max(rows[k].total, 0) / sum) * room;
      cursor += w[k];
      const own = Math.max(rows[k].total, 0);
      let inner = 0;
      for (const c of kids[k]) inner += Math.max(rows[c].total, 0);
      // Children by their share of the parent's time, all of it when they overlap.
      if (kids[k].length) todo.push([kids[k], x[k], inner > own ? w[k] : (w[k] * inner) / (own || 1), level + 1]);
    }
  }
  return { x, w, depth };
}

/**
 * The table row whose frame holds (x, y), -1 for none.
 * @param {FlameRow[]} rows
 * @param {IcicleLayout} lay
 * @param {number} x
 * @param {number} y
 */
export function frameAt(rows, lay, x, y) {
  const level = Math.floor(y / ROW_H);
  for (let k = 0; k < rows.length; k++) {
    if (rows[k].depth === level && lay.w[k] > 0 && x >= lay.x[k] && x < lay.x[k] + lay.w[k]) return k;
  }
  return -1;
}

export class FlameView {
  /**
   * @param {App} app
   * @param {HTMLElement} host the flame container (hidden while the view is off)
   */
  constructor(app, host) {
    this.app = app;
    this.host = host;
    this.title = el("div", "stw-flame-title");
    this.canvas = /** @type {HTMLCanvasElement} */ (el("canvas", "stw-flame-canvas"));
    this.tooltip = el("div", "stw-flame-tip");
    this.tooltip.hidden = true;
    host.append(this.title, this.canvas, this.tooltip);
    /** @type {Flame|null} */
    this.flame = null;
    /** @type {IcicleLayout|null} */
    this.lay = null;
    /** @type {unknown[]} inputs the table was built from */
    this.key = [];
    this.row = -1;
    this.hover = -1;
    /** @type {Uint8Array|null} the focus mask this view set */
    this.focus = null;
    this.width = 0;
    this.onMove = (/** @type {MouseEvent} */ e) => this.pointer(e);
    this.onLeave = () => {
      this.tooltip.hidden = true;
      this.setHover(-1);
    };
    this.onClick = (/** @type {MouseEvent} */ e) => {
      const k = this.at(e);
      app.root.focus({ preventScroll: true }); // Esc reaches the widget's key handler
      if (k >= 0) this.choose(k === this.row ? -1 : k, true);
    };
    this.canvas.addEventListener("mousemove", this.onMove);
    this.canvas.addEventListener("mouseleave", this.onLeave);
    this.canvas.addEventListener("click", this.onClick);
    this.ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(() => this.draw()) : null;
    this.ro?.observe(host);
    host.hidden = !app.settings.flame;
    this.changed();
  }

  /** Show or hide the view (the `flame` setting changed). */
  show() {
    const on = this.app.settings.flame;
    this.host.hidden = !on;
    if (!on) this.choose(-1, this.app.sync.get("selected")?.kind === "flame");
    else this.changed();
  }

  /** The inputs the table depends on changed, maybe: rebuild it when they did and the view is open. */
  changed() {
    const app = this.app;
    if (!app.settings.flame) return;
    const s = app.settings;
    const b = app.brush;
    /** @type {[number, number]|null} */
    const win = b ? [Math.min(b[0], b[1]), Math.max(b[0], b[1])] : null;
    const key = [app.data, app.rows, s.showOpen, s.attempt, s.attemptMode, app.masks.keep, win ? win[0] : NaN, win ? win[1] : NaN];
    if (this.flame && key.every((v, k) => Object.is(v, this.key[k]))) return;
    this.key = key;
    const d = app.data;
    const shown = new Uint8Array(d.nSamples);
    for (const smp of app.rows) shown[smp] = 1;
    const vis = spanVisibility(d, { showOpen: s.showOpen, showEvents: false, showUnmatched: false, attempt: s.attempt, attemptMode: s.attemptMode, highlightName: -1, keep: app.masks.keep });
    const measured = measuredSpans(d);
    const include = new Uint8Array(d.nSpans);
    for (let i = 0; i < d.nSpans; i++) include[i] = measured[i] && vis[i] !== HIDDEN && shown[d.spanSample[i]] ? 1 : 0;
    this.flame = flameOf(d, include, win);
    const spans = this.flame.rows.reduce((n, r) => n + (r.depth === 0 ? r.count : 0), 0);
    this.title.textContent = `flame · ${win ? `range ${formatDuration(win[0])} – ${formatDuration(win[1])}` : `${formatNumber(app.rows.length)} rows`} · ${formatNumber(spans)} root spans · click a frame to highlight its spans`;
    const path = app.flamePath;
    this.row = -1;
    this.hover = -1;
    const k = path === null ? -1 : this.flame.rows.findIndex((r) => r.path === path);
    this.applyFocus(k);
    this.lay = null;
    this.draw();
  }

  /**
   * Select table row `k` (-1: none): the focus mask, `flame_path` and, when
   * `write`, the `selected` trait.
   * @param {number} k
   * @param {boolean} write
   */
  choose(k, write) {
    const app = this.app;
    if (k >= 0 && app.selection) app.select(null);
    this.applyFocus(k);
    app.flamePath = k >= 0 && this.flame ? this.flame.rows[k].path : null;
    if (write) {
      const r = k >= 0 && this.flame ? this.flame.rows[k] : null;
      app.sync.setNow("selected", r ? { kind: "flame", path: r.path, count: r.count, total: r.total, self: r.self } : {});
    }
    app.saveViewState();
    this.draw();
  }

  /**
   * Focus the spans of table row `k` in the timeline (-1: drop this view's focus).
   * @param {number} k
   */
  applyFocus(k) {
    const app = this.app;
    this.row = k;
    if (k < 0 || !this.flame) {
      if (this.focus && app.masks.focus === this.focus) app.setMasks({ focus: null, evFocus: null });
      this.focus = null;
      return;
    }
    const spanRow = this.flame.spanRow;
    const focus = new Uint8Array(spanRow.length);
    for (let i = 0; i < spanRow.length; i++) focus[i] = spanRow[i] === k ? 1 : 0;
    // A segment frame: the phase spans owning its segments.
    const segRow = this.flame.segRow;
    for (let g = 0; g < segRow.length; g++) if (segRow[g] === k) focus[app.data.segSpan[g]] = 1;
    this.focus = focus;
    app.setMasks({ focus, evFocus: new Uint8Array(app.data.nEvents) });
  }

  /** A timeline selection replaces a chosen frame (`selected` now names the item). */
  dropPath() {
    if (this.row < 0 && this.app.flamePath === null) return;
    this.choose(-1, false);
  }

  /** Esc: clear a chosen frame; true when there was one. */
  escape() {
    if (this.row < 0) return false;
    this.choose(-1, true);
    return true;
  }

  /**
   * `selected` set from Python names a frame by path.
   * @param {any} sel
   */
  fromModel(sel) {
    const path = typeof sel.path === "string" ? sel.path : null;
    if (path === this.app.flamePath) return;
    this.app.flamePath = path;
    if (!this.app.settings.flame) {
      // No table to match it against while the view is off (an old one could be of
      // another payload): it applies when the view opens.
      this.app.saveViewState();
      return;
    }
    this.changed();
    const k = path === null || !this.flame ? -1 : this.flame.rows.findIndex((r) => r.path === path);
    if (k >= 0 && this.app.selection) this.app.select(null);
    this.applyFocus(k);
    this.app.saveViewState();
    this.draw();
  }

  /** @param {MouseEvent} e */
  at(e) {
    if (!this.flame || !this.lay) return -1;
    const r = this.canvas.getBoundingClientRect();
    return frameAt(this.flame.rows, this.lay, e.clientX - r.left, e.clientY - r.top);
  }

  /** @param {MouseEvent} e */
  pointer(e) {
    const k = this.at(e);
    this.setHover(k);
    if (k < 0 || !this.flame) {
      this.tooltip.hidden = true;
      return;
    }
    this.fillTooltip(this.flame.rows[k]);
    const hr = this.host.getBoundingClientRect();
    this.tooltip.hidden = false;
    const tw = this.tooltip.offsetWidth;
    const th = this.tooltip.offsetHeight;
    let x = e.clientX - hr.left + 14;
    if (x + tw > hr.width - 4) x = Math.max(4, e.clientX - hr.left - tw - 14);
    let y = e.clientY - hr.top + 16;
    if (y + th > hr.height - 4) y = e.clientY - hr.top - th - 12; // above the pointer (over the timeline)
    this.tooltip.style.transform = `translate(${Math.round(x)}px, ${Math.round(y)}px)`;
  }

  /** @param {number} k */
  setHover(k) {
    if (k === this.hover) return;
    this.hover = k;
    this.canvas.style.cursor = k >= 0 ? "pointer" : "";
    this.draw();
  }

  /** @param {FlameRow} r */
  fillTooltip(r) {
    const tt = this.tooltip;
    tt.replaceChildren(el("div", "stw-tt-title", r.name));
    /** @param {string} k @param {string} v */
    const line = (k, v) => {
      const row = el("div", "stw-tt-row");
      row.append(el("span", "stw-tt-k", k), el("span", "stw-tt-v", v));
      tt.appendChild(row);
    };
    line("path", r.path.length > 160 ? `…${r.path.slice(-160)}` : r.path);
    line("spans", formatNumber(r.count));
    line("total", formatDuration(r.total));
    line("self", formatDuration(r.self));
    line("p50", formatDuration(r.p50));
    line("p95", formatDuration(r.p95));
  }

  draw() {
    if (this.host.hidden || !this.flame) return;
    const width = this.host.clientWidth;
    if (!width) return;
    const rows = this.flame.rows;
    if (!this.lay || width !== this.width) {
      this.lay = icicleLayout(rows, width);
      this.width = width;
    }
    const lay = this.lay;
    const theme = this.app.theme;
    const dpr = Math.max(1, window.devicePixelRatio || 1);
    const height = Math.max(1, lay.depth) * ROW_H;
    sizeCanvas(this.canvas, width, height, dpr);
    const ctx = /** @type {CanvasRenderingContext2D} */ (this.canvas.getContext("2d"));
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = theme.bg;
    ctx.fillRect(0, 0, width, height);
    ctx.font = `11px ${theme.font}`;
    ctx.textBaseline = "middle";
    for (let k = 0; k < rows.length; k++) {
      const w = lay.w[k];
      if (w < 0.5) continue;
      const y = rows[k].depth * ROW_H;
      const dim = this.row >= 0 && k !== this.row;
      const base = colorForName(rows[k].name);
      ctx.globalAlpha = dim ? 0.35 : 1;
      ctx.fillStyle = base;
      ctx.fillRect(lay.x[k], y, Math.max(w - 1, 0.5), ROW_H - 1);
      if (k === this.hover || k === this.row) {
        ctx.strokeStyle = theme.fg0;
        ctx.lineWidth = k === this.row ? 2 : 1;
        ctx.strokeRect(lay.x[k] + 0.5, y + 0.5, Math.max(w - 2, 0.5), ROW_H - 2);
      }
      if (w > 30) {
        ctx.fillStyle = textOn(base);
        ctx.save();
        ctx.beginPath();
        ctx.rect(lay.x[k], y, w - 2, ROW_H);
        ctx.clip();
        ctx.fillText(rows[k].name, lay.x[k] + 3, y + ROW_H / 2);
        ctx.restore();
      }
    }
    ctx.globalAlpha = 1;
  }

  /** Frames as drawn, in client px (test hook). */
  debug() {
    const rows = this.flame ? this.flame.rows : [];
    const lay = this.lay;
    const r = this.canvas.getBoundingClientRect();
    return {
      on: this.app.settings.flame,
      path: this.app.flamePath,
      chosen: this.row,
      frames: rows.map((f, k) => ({
        path: f.path, count: f.count, total: f.total, self: f.self, p50: f.p50, p95: f.p95,
        rect: lay && lay.w[k] > 0 ? { x: r.left + lay.x[k], y: r.top + f.depth * ROW_H, w: lay.w[k], h: ROW_H } : null,
      })),
    };
  }

  dispose() {
    this.ro?.disconnect();
    this.canvas.removeEventListener("mousemove", this.onMove);
    this.canvas.removeEventListener("mouseleave", this.onLeave);
    this.canvas.removeEventListener("click", this.onClick);
  }
}
