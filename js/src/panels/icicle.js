// The flame view: an icicle of the flame table (flame.js) of the shown samples
// (rows after the filters, spans not hidden), or of the shift-drag range when
// there is one (spans clipped to it). Roots are laid side by side by total
// time, each frame's children inside it (scaled down when concurrent children
// add up to more than their parent); a frame with no spans of its own in the
// range (above a child that outlived it) is as wide as its children. Clicking a
// frame focuses its spans in the timeline and reports it in `selected`; clicking
// it again or Esc clears.
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
  const count = rows.length;
  const x = new Float64Array(count);
  const widths = new Float64Array(count);
  /** @type {number[][]} children of each row; the roots last */
  const kids = Array.from({ length: count + 1 }, () => /** @type {number[]} */ ([]));
  let depth = 0;
  rows.forEach((row, rowIndex) => kids[row.parent < 0 ? count : row.parent].push(rowIndex));
  const size = frameSizes(rows, kids);
  // Sibling lists to place, each with its left edge, the px it may fill and its level:
  // a work list rather than recursion, so a path thousands of frames deep cannot
  // exhaust the stack.
  /** @type {[number[], number, number, number][]} */
  const todo = [[kids[count], 0, width, 0]];
  while (todo.length) {
    const [list, left, room, level] = /** @type {[number[], number, number, number]} */ (todo.pop());
    let sum = 0;
    for (const rowIndex of list) sum += size[rowIndex];
    if (!(sum > 0)) continue;
    depth = Math.max(depth, level + 1);
    let cursor = left;
    for (const rowIndex of list) {
      x[rowIndex] = cursor;
      widths[rowIndex] = (size[rowIndex] / sum) * room;
      cursor += widths[rowIndex];
      const own = size[rowIndex];
      let inner = 0;
      for (const child of kids[rowIndex]) inner += size[child];
      // Children by their share of the parent's time, all of it when they overlap.
      if (kids[rowIndex].length) todo.push([kids[rowIndex], x[rowIndex], inner > own ? widths[rowIndex] : (widths[rowIndex] * inner) / (own || 1), level + 1]);
    }
  }
  return { x, w: widths, depth };
}

/**
 * What each frame of `rows` is laid out by: its total time, or for a frame with no
 * spans of its own (count 0: the range holds only a child that outlived it) its
 * children's sizes added up. Deepest rows first, so children come before parents.
 * @param {FlameRow[]} rows
 * @param {number[][]} kids children of each row
 * @returns {Float64Array}
 */
function frameSizes(rows, kids) {
  const size = new Float64Array(rows.length);
  const deepestFirst = rows.map((_, rowIndex) => rowIndex).sort((a, b) => rows[b].depth - rows[a].depth);
  for (const rowIndex of deepestFirst) {
    if (rows[rowIndex].count > 0) size[rowIndex] = Math.max(rows[rowIndex].total, 0);
    else for (const child of kids[rowIndex]) size[rowIndex] += size[child];
  }
  return size;
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
  for (let rowIndex = 0; rowIndex < rows.length; rowIndex++) {
    if (rows[rowIndex].depth === level && lay.w[rowIndex] > 0 && x >= lay.x[rowIndex] && x < lay.x[rowIndex] + lay.w[rowIndex]) return rowIndex;
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
    this.onMove = (/** @type {MouseEvent} */ event) => this.pointer(event);
    this.onLeave = () => {
      this.tooltip.hidden = true;
      this.setHover(-1);
    };
    this.onClick = (/** @type {MouseEvent} */ event) => {
      const rowIndex = this.at(event);
      app.ui.root.focus({ preventScroll: true }); // Esc reaches the widget's key handler
      if (rowIndex >= 0) this.choose(rowIndex === this.row ? -1 : rowIndex, true);
    };
    this.canvas.addEventListener("mousemove", this.onMove);
    this.canvas.addEventListener("mouseleave", this.onLeave);
    this.canvas.addEventListener("click", this.onClick);
    this.ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(() => this.draw()) : null;
    this.ro?.observe(host);
    host.hidden = !app.viewState.settings.flame;
    this.changed();
  }

  /** Show or hide the view (the `flame` setting changed). */
  show() {
    const on = this.app.viewState.settings.flame;
    this.host.hidden = !on;
    if (!on) this.choose(-1, this.app.sync.get("selected")?.kind === "flame");
    else this.changed();
  }

  /** The inputs the table depends on changed, maybe: rebuild it when they did and the view is open. */
  changed() {
    const app = this.app;
    if (!app.viewState.settings.flame) return;
    const settings = app.viewState.settings;
    const brush = app.pointer.brush;
    /** @type {[number, number]|null} */
    const win = brush ? [Math.min(brush[0], brush[1]), Math.max(brush[0], brush[1])] : null;
    const key = [app.shown.data, app.shown.rows, settings.showOpen, settings.attempt, settings.attemptMode, app.shown.masks.keep, win ? win[0] : NaN, win ? win[1] : NaN];
    if (this.flame && key.every((value, index) => Object.is(value, this.key[index]))) return;
    this.key = key;
    const data = app.shown.data;
    const shown = new Uint8Array(data.nSamples);
    for (const smp of app.shown.rows) shown[smp] = 1;
    const vis = spanVisibility(data, { showOpen: settings.showOpen, showEvents: false, showUnmatched: false, attempt: settings.attempt, attemptMode: settings.attemptMode, highlightName: -1, keep: app.shown.masks.keep });
    const measured = measuredSpans(data);
    const include = new Uint8Array(data.nSpans);
    for (let i = 0; i < data.nSpans; i++) include[i] = measured[i] && vis[i] !== HIDDEN && shown[data.spanSample[i]] ? 1 : 0;
    this.flame = flameOf(data, include, win);
    const spans = this.flame.rows.reduce((sum, row) => sum + (row.depth === 0 ? row.count : 0), 0);
    this.title.textContent = `flame · ${win ? `range ${formatDuration(win[0])} – ${formatDuration(win[1])}` : `${formatNumber(app.shown.rows.length)} rows`} · ${formatNumber(spans)} root spans · click a frame to highlight its spans`;
    const path = app.viewState.flamePath;
    this.row = -1;
    this.hover = -1;
    const rowIndex = path === null ? -1 : this.flame.rows.findIndex((row) => row.path === path);
    this.applyFocus(rowIndex);
    this.lay = null;
    this.draw();
  }

  /**
   * Select table row `rowIndex` (-1: none): the focus mask, `flame_path` and, when
   * `write`, the `selected` trait.
   * @param {number} rowIndex
   * @param {boolean} write
   */
  choose(rowIndex, write) {
    const app = this.app;
    if (rowIndex >= 0 && app.pointer.selection) app.select(null);
    this.applyFocus(rowIndex);
    app.viewState.flamePath = rowIndex >= 0 && this.flame ? this.flame.rows[rowIndex].path : null;
    if (write) {
      const row = rowIndex >= 0 && this.flame ? this.flame.rows[rowIndex] : null;
      app.sync.setNow("selected", row ? { kind: "flame", path: row.path, count: row.count, total: row.total, self: row.self } : {});
    }
    app.saveViewState();
    this.draw();
  }

  /**
   * Focus the spans of table row `rowIndex` in the timeline (-1: drop this view's focus).
   * @param {number} rowIndex
   */
  applyFocus(rowIndex) {
    const app = this.app;
    this.row = rowIndex;
    if (rowIndex < 0 || !this.flame) {
      if (this.focus && app.shown.masks.focus === this.focus) app.setMasks({ focus: null, evFocus: null });
      this.focus = null;
      return;
    }
    const spanRow = this.flame.spanRow;
    const focus = new Uint8Array(spanRow.length);
    for (let i = 0; i < spanRow.length; i++) focus[i] = spanRow[i] === rowIndex ? 1 : 0;
    // A segment frame: the phase spans owning its segments.
    const segRow = this.flame.segRow;
    for (let seg = 0; seg < segRow.length; seg++) if (segRow[seg] === rowIndex) focus[app.shown.data.segSpan[seg]] = 1;
    this.focus = focus;
    app.setMasks({ focus, evFocus: new Uint8Array(app.shown.data.nEvents) });
  }

  /** A timeline selection replaces a chosen frame (`selected` now names the item). */
  dropPath() {
    if (this.row < 0 && this.app.viewState.flamePath === null) return;
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
    if (path === this.app.viewState.flamePath) return;
    this.app.viewState.flamePath = path;
    if (!this.app.viewState.settings.flame) {
      // No table to match it against while the view is off (an old one could be of
      // another payload): it applies when the view opens.
      this.app.saveViewState();
      return;
    }
    this.changed();
    const rowIndex = path === null || !this.flame ? -1 : this.flame.rows.findIndex((row) => row.path === path);
    if (rowIndex >= 0 && this.app.pointer.selection) this.app.select(null);
    this.applyFocus(rowIndex);
    this.app.saveViewState();
    this.draw();
  }

  /** @param {MouseEvent} event */
  at(event) {
    if (!this.flame || !this.lay) return -1;
    const rect = this.canvas.getBoundingClientRect();
    return frameAt(this.flame.rows, this.lay, event.clientX - rect.left, event.clientY - rect.top);
  }

  /** @param {MouseEvent} event */
  pointer(event) {
    const rowIndex = this.at(event);
    this.setHover(rowIndex);
    if (rowIndex < 0 || !this.flame) {
      this.tooltip.hidden = true;
      return;
    }
    this.fillTooltip(this.flame.rows[rowIndex]);
    const hr = this.host.getBoundingClientRect();
    this.tooltip.hidden = false;
    const tw = this.tooltip.offsetWidth;
    const th = this.tooltip.offsetHeight;
    let x = event.clientX - hr.left + 14;
    if (x + tw > hr.width - 4) x = Math.max(4, event.clientX - hr.left - tw - 14);
    let y = event.clientY - hr.top + 16;
    if (y + th > hr.height - 4) y = event.clientY - hr.top - th - 12; // above the pointer (over the timeline)
    this.tooltip.style.transform = `translate(${Math.round(x)}px, ${Math.round(y)}px)`;
  }

  /** @param {number} rowIndex */
  setHover(rowIndex) {
    if (rowIndex === this.hover) return;
    this.hover = rowIndex;
    this.canvas.style.cursor = rowIndex >= 0 ? "pointer" : "";
    this.draw();
  }

  /** @param {FlameRow} flameRow */
  fillTooltip(flameRow) {
    const tt = this.tooltip;
    tt.replaceChildren(el("div", "stw-tt-title", flameRow.name));
    /** @param {string} label @param {string} value */
    const line = (label, value) => {
      const row = el("div", "stw-tt-row");
      row.append(el("span", "stw-tt-k", label), el("span", "stw-tt-v", value));
      tt.appendChild(row);
    };
    line("path", flameRow.path.length > 160 ? `…${flameRow.path.slice(-160)}` : flameRow.path);
    line("spans", formatNumber(flameRow.count));
    line("total", formatDuration(flameRow.total));
    line("self", formatDuration(flameRow.self));
    line("p50", formatDuration(flameRow.p50));
    line("p95", formatDuration(flameRow.p95));
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
    const theme = this.app.drawing.theme;
    const dpr = Math.max(1, window.devicePixelRatio || 1);
    const height = Math.max(1, lay.depth) * ROW_H;
    sizeCanvas(this.canvas, width, height, dpr);
    const ctx = /** @type {CanvasRenderingContext2D} */ (this.canvas.getContext("2d"));
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = theme.bg;
    ctx.fillRect(0, 0, width, height);
    ctx.font = `11px ${theme.font}`;
    ctx.textBaseline = "middle";
    for (let rowIndex = 0; rowIndex < rows.length; rowIndex++) {
      const frameWidth = lay.w[rowIndex];
      if (frameWidth < 0.5) continue;
      const y = rows[rowIndex].depth * ROW_H;
      const dim = this.row >= 0 && rowIndex !== this.row;
      const base = colorForName(rows[rowIndex].name);
      ctx.globalAlpha = dim ? 0.35 : 1;
      ctx.fillStyle = base;
      ctx.fillRect(lay.x[rowIndex], y, Math.max(frameWidth - 1, 0.5), ROW_H - 1);
      if (rowIndex === this.hover || rowIndex === this.row) {
        ctx.strokeStyle = theme.fg0;
        ctx.lineWidth = rowIndex === this.row ? 2 : 1;
        ctx.strokeRect(lay.x[rowIndex] + 0.5, y + 0.5, Math.max(frameWidth - 2, 0.5), ROW_H - 2);
      }
      if (frameWidth > 30) {
        ctx.fillStyle = textOn(base);
        ctx.save();
        ctx.beginPath();
        ctx.rect(lay.x[rowIndex], y, frameWidth - 2, ROW_H);
        ctx.clip();
        ctx.fillText(rows[rowIndex].name, lay.x[rowIndex] + 3, y + ROW_H / 2);
        ctx.restore();
      }
    }
    ctx.globalAlpha = 1;
  }

  dispose() {
    this.ro?.disconnect();
    this.canvas.removeEventListener("mousemove", this.onMove);
    this.canvas.removeEventListener("mouseleave", this.onLeave);
    this.canvas.removeEventListener("click", this.onClick);
  }
}
