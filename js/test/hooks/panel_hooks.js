// What the browser tests read of the views beside the timeline: the samples'
// fates (ledger bars, markers, row fills), the flame view, the rollout diff and a
// live rollout, each as shown, in client px (docs/payload.md, "Testing hooks").

import { FATES } from "../../src/data/fates.js";
import { F_OPEN } from "../../src/data/decode.js";
import { rowFill, stripFill } from "../../src/render/fate_rows.js";
import { ROW_H } from "../../src/panels/icicle.js";
import { diffScopeText } from "../../src/panels/diff_panel.js";

/** @typedef {import("../../src/panels/fate_view.js").FateView} FateView */
/** @typedef {import("../../src/panels/icicle.js").FlameView} FlameView */
/** @typedef {import("../../src/panels/diff_panel.js").DiffView} DiffView */
/** @typedef {import("../../src/live/live_view.js").LiveView} LiveView */
/** @typedef {import("../../src/data/diff.js").DiffSide} DiffSide */

/**
 * @param {Element} element
 * @returns {{x: number, y: number, w: number, h: number}}
 */
function clientRect(element) {
  const rect = element.getBoundingClientRect();
  return { x: rect.left, y: rect.top, w: rect.width, h: rect.height };
}

/**
 * The colouring, counts, ledger bars and 90%-finished markers as shown.
 * @param {FateView} fates
 */
export function fateHooks(fates) {
  const app = fates.app;
  const data = app.shown.data;
  const canvas = app.ui.canvas.getBoundingClientRect();
  const geometry = app.geometry();
  /** @param {number} rollout @param {string} part */
  const partOf = (rollout, part) => `.stw-ledger-row[data-rollout="${rollout}"] ${part}`;
  return {
    colorBy: app.viewState.settings.colorBy,
    on: fates.on,
    counts: Object.fromEntries(FATES.map((fate, k) => [fate, fates.counts[k] ?? 0])),
    bars: data.meta.ledger.entries.map((entry) => {
      const bar = fates.host.querySelector(partOf(entry.rollout, ".stw-ledger-bar"));
      return {
        rollout: entry.rollout,
        name: data.meta.rollouts[entry.rollout] ?? null,
        samples: Object.fromEntries(FATES.map((fate, k) => [fate, entry.samples[k]])),
        seconds: Object.fromEntries(FATES.map((fate, k) => [fate, entry.seconds[k]])),
        segments: Array.from(fates.host.querySelectorAll(partOf(entry.rollout, ".stw-ledger-seg")), (segment) => ({
          fate: segment instanceof HTMLElement ? segment.dataset.fate : null,
          text: segment.textContent,
          rect: clientRect(segment),
        })),
        rect: bar ? clientRect(bar) : null,
      };
    }),
    markers: app.drawing.painter.finishPlaced.map((item) => ({
      rollout: item.marker.rollout,
      time: item.marker.time,
      seconds: item.marker.seconds,
      text: item.text,
      labelShown: !Number.isNaN(item.labelX),
      x: canvas.left + item.x,
      y: canvas.top + (geometry.axisH - geometry.tracksH) / 2,
    })),
  };
}

/**
 * The background and strip colours of row `row`, as if neither selected nor hovered.
 * @param {FateView} fates
 * @param {number} row
 */
export function rowFillHook(fates, row) {
  const app = fates.app;
  const scene = { d: app.shown.data, L: app.shown.layout, theme: app.drawing.theme, selRow: -1, hoverRow: -1, fates: fates.frame(app.geometry()) };
  return { fill: rowFill(scene, row), strip: stripFill(scene, row) };
}

/**
 * The flame view's frames (figures, client rects) and the chosen path.
 * @param {FlameView} flame
 */
export function flameHooks(flame) {
  const rows = flame.flame ? flame.flame.rows : [];
  const layout = flame.lay;
  const rect = flame.canvas.getBoundingClientRect();
  return {
    on: flame.app.viewState.settings.flame,
    path: flame.app.viewState.flamePath,
    chosen: flame.row,
    frames: rows.map((row, rowIndex) => ({
      path: row.path, count: row.count, total: row.total, self: row.self, p50: row.p50, p95: row.p95,
      rect: layout && layout.w[rowIndex] > 0 ? { x: rect.left + layout.x[rowIndex], y: rect.top + row.depth * ROW_H, w: layout.w[rowIndex], h: ROW_H } : null,
    })),
  };
}

/**
 * The rollout diff: pair, rows, the focused name and side.
 * @param {DiffView} diff
 */
export function diffHooks(diff) {
  const side = (/** @type {DiffSide|null} */ stats) => (stats ? { count: stats.count, p50: stats.p50, p95: stats.p95, total: stats.total, open: stats.open, slowest: stats.slowest } : null);
  const open = diff.isOpen();
  const focus = diff.focus;
  return {
    available: diff.available(),
    open,
    pair: open ? [...diff.pair] : null,
    scope: open ? diffScopeText(diff.app.shown.data, diff.scope) : null,
    rows: open ? diff.rows.map((row) => ({ name: row.label, a: side(row.a), b: side(row.b), totalDiff: row.totalDiff, p50Ratio: row.p50Ratio })) : [],
    focus: focus ? { name: diff.rows.find((row) => row.name === focus.name)?.label ?? null, side: focus.side, span: focus.span } : null,
  };
}

/**
 * A live rollout's state: what arrived, what runs, stalls and grows, the marks drawn and the banner.
 * @param {LiveView} live
 */
export function liveHooks(live) {
  const status = live.status;
  const data = live.app.shown.data;
  return {
    seq: live.state.seq,
    samples: live.state.nSamples,
    now: live.now(),
    following: live.following,
    running: status?.nRunning ?? 0,
    stalled: status ? Array.from(status.stalled.keys()).filter((s) => status.stalled[s]) : [],
    stragglers: status ? Array.from(status.straggler.keys()).filter((s) => status.straggler[s]) : [],
    stuck: status ? Array.from(status.stuckSpan) : [],
    growing: Array.from(live.growing, (span) => ({ span, name: data.names[data.spanName[span]], end: data.spanEnd[span] })),
    spans: Array.from({ length: data.nSpans }, (_, span) => ({ span, name: data.names[data.spanName[span]], start: data.spanStart[span], end: data.spanEnd[span], open: (data.spanFlags[span] & F_OPEN) !== 0 })),
    p90: status?.p90 ?? NaN,
    tags: live.marks?.tags ?? [],
    nowX: live.marks?.x ?? NaN,
    banner: live.banner.textContent,
    lost: Number(live.banner.dataset.lost || 0),
  };
}
