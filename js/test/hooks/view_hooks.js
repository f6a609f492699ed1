// The hook table `root.stwDebug` the browser tests and benchmarks read and drive
// (docs/payload.md, "Testing hooks"): item rectangles in client px, rows, frame
// times, state, and a few actions. It is built outside the package and injected
// into the page under test (index.js); it reads the view through the `stwApp`
// handle the package leaves on the root element.

import { nameOf } from "../../src/data/decode.js";
import { spanBox, eventBox, hitBox } from "../../src/render/hit.js";
import { stepName } from "../../src/data/critical.js";
import { laneLabel } from "../../src/data/lane_labels.js";
import { trackReadings } from "../../src/render/tracks.js";
import { fateHooks, rowFillHook, flameHooks, diffHooks, liveHooks } from "./panel_hooks.js";

/** @typedef {import("../../src/ui/app.js").App} App */

/**
 * The hooks of `app`: one table, in groups by what they answer (one object literal,
 * so the typecheck refuses a name given twice).
 * @param {App} app
 */
export function viewHooks(app) {
  return {
    // where items are drawn, in client px (null when not visible), and what is at a point
    /** @param {number} index payload span index */
    spanRect(index) {
      return toClient(app, spanBox(app.shown.data, app.shown.layout, app.geometry(), index));
    },
    /** @param {number} index payload event index */
    eventRect(index) {
      return toClient(app, eventBox(app.shown.data, app.shown.layout, app.geometry(), index));
    },
    selectionRect() {
      return toClient(app, hitBox(app.shown.data, app.shown.layout, app.geometry(), app.pointer.selection));
    },
    /**
     * What is at a client point (for tests).
     * @param {number} clientX
     * @param {number} clientY
     */
    hitAt(clientX, clientY) {
      const rect = app.ui.canvas.getBoundingClientRect();
      return app.hitAt(clientX - rect.left, clientY - rect.top);
    },
    /** Link arrows of the selection as last painted: kind, ends, client px (docs/payload.md). */
    links() {
      const rect = app.ui.canvas.getBoundingClientRect();
      return (app.drawing.arrows || []).map((arrow) => ({ ...arrow, x0: rect.left + arrow.x0, y0: rect.top + arrow.y0, x1: rect.left + arrow.x1, y1: rect.top + arrow.y1 }));
    },
    /** @param {number} sampleIndex payload sample index */
    rowOfSample(sampleIndex) {
      return app.shown.layout.rowOfSample[sampleIndex] ?? -1;
    },
    /** @param {number} row */
    scrollToRow(row) {
      const clampedRow = Math.max(0, Math.min(app.shown.rows.length - 1, row));
      app.ui.scrollEl.scrollTop = app.shown.layout.rowTop[clampedRow] ?? 0;
      app.requestFrame();
    },
    // frames: their times and counts, and asking for one
    frameTimes() {
      return app.drawing.loop.frameLog.slice();
    },
    get firstPaintMs() {
      return app.drawing.loop.firstPaintMs;
    },
    /** Frames painted since render (frameTimes keeps the last 600). */
    get frameCount() {
      return app.drawing.loop.frameCount;
    },
    /** Frames skipped because the timeline had no width (sizing.js). */
    get skippedFrames() {
      return app.drawing.sizer.skipped;
    },
    /** Pieces of the engine band painted in the last frame (collapsed rows). */
    get bandPieces() {
      return app.drawing.painter.band.drawn;
    },
    /** Ask for a frame, as any change of state does. */
    repaint() {
      app.requestFrame();
    },
    // the view's state, what it draws, hides and dims, and moving it
    state() {
      return {
        viewStart: app.viewState.timeWindow.t0,
        viewEnd: app.viewState.timeWindow.t1,
        sort: app.viewState.settings.sort,
        desc: app.viewState.settings.desc,
        filter: app.viewState.settings.filter,
        attempt: app.viewState.settings.attempt,
        attemptMode: app.viewState.settings.attemptMode,
        showEvents: app.viewState.settings.showEvents,
        showOpen: app.viewState.settings.showOpen,
        showUnmatched: app.viewState.settings.showUnmatched,
        laneHeight: app.viewState.settings.laneH,
        expandAll: app.viewState.settings.expandAll,
        expanded: [...app.viewState.expanded],
        collapsed: [...app.viewState.collapsed],
        highlight: app.viewState.highlight >= 0 ? nameOf(app.shown.data, app.viewState.highlight) : null,
        cursor: Number.isFinite(app.pointer.cursor) ? app.pointer.cursor : null,
        brush: app.pointer.brush ? [...app.pointer.brush] : null,
        selected: app.pointer.selection ? app.selectedValue(app.pointer.selection) : null,
        rows: app.shown.rows.length,
        scrollTop: app.ui.scrollEl.scrollTop,
        counts: app.pointer.counts ? { notStarted: app.pointer.counts.notStarted, running: app.pointer.counts.running, ended: app.pointer.counts.ended } : null,
      };
    },
    /**
     * How payload item `index` is drawn: 0 hidden (a filter, toggle or query), 1 drawn, 2 dimmed.
     * @param {"span"|"event"} kind
     * @param {number} index
     */
    visibility(kind, index) {
      return (kind === "event" ? app.shown.evVis : app.shown.vis)[index] ?? -1;
    },
    /** Spans drawn, dimmed and hidden (the views' focus masks dim). */
    visCounts() {
      const counts = [0, 0, 0];
      for (const visibility of app.shown.vis) counts[visibility]++;
      return { hidden: counts[0], shown: counts[1], dimmed: counts[2] };
    },
    /**
     * @param {number} start
     * @param {number} end
     */
    setView(start, end) {
      app.setView(start, end);
      app.userView();
    },
    // what the views, panels and lanes show
    /** The rollout diff: pair, rows, the focused name and side (diff_panel.js). */
    diff() {
      return app.views.diff ? diffHooks(app.views.diff) : null;
    },
    /** The critical path shown: payload span (and segment, -1 none) indices, names and exclusive seconds, in time order. */
    critical() {
      const cv = app.views.critical;
      return cv ? { on: app.viewState.settings.critical, sample: cv.sample, path: cv.path.map((step) => ({ span: step.span, seg: step.seg, name: stepName(app.shown.data, step), critical: step.critical })) } : null;
    },
    /** The flame view: its frames (figures, client rects) and the chosen path. */
    flame() {
      return app.views.flameView ? flameHooks(app.views.flameView) : null;
    },
    /**
     * The labels of payload sample `sampleIndex`'s lanes when expanded, `{text, names, role}` (lane 0 shows the sample's own label).
     * @param {number} sampleIndex
     */
    laneLabels(sampleIndex) {
      const data = app.shown.data;
      if (!(sampleIndex >= 0 && sampleIndex < data.nSamples)) return [];
      const base = data.laneBase[sampleIndex];
      return Array.from({ length: data.nLanes[sampleIndex] }, (_, lane) => ({ ...laneLabel(data, base + lane) }));
    },
    /** The engines' load tracks as drawn: mode, and each track's label, value at the cursor (null) and client rect. */
    tracks() {
      const geometry = app.geometry();
      const rect = app.ui.canvas.getBoundingClientRect();
      const readings = trackReadings(app.shown.data.load, app.viewState.settings.loadSplit, geometry, app.pointer.cursor);
      return {
        split: app.viewState.settings.loadSplit,
        height: geometry.tracksH,
        tracks: readings.map((reading) => ({
          label: reading.label,
          track: reading.series.track,
          engine: reading.series.engine < 0 ? null : app.shown.data.load.engines[reading.series.engine] ?? null,
          value: Number.isNaN(reading.value) ? null : reading.value,
          rect: { x: rect.left + reading.box.x, y: rect.top + reading.box.y, w: reading.box.w, h: reading.box.h },
        })),
      };
    },
    /** The samples' fates as shown: colouring, counts, ledger bars and 90%-finished markers (panels/fate_view.js). */
    fates() {
      return app.views.fates ? fateHooks(app.views.fates) : null;
    },
    /**
     * Row `row`'s background and fate strip colours (as if neither selected nor hovered).
     * @param {number} row
     */
    rowFill(row) {
      return app.views.fates ? rowFillHook(app.views.fates, row) : null;
    },
    /** A live rollout's state (live/live_view.js), null for a dump. */
    live() {
      return app.live ? liveHooks(app.live) : null;
    },
  };
}

/**
 * `box`, in canvas px, as client px cut to the plot; null when none of it is in the plot.
 * @param {App} app
 * @param {{x: number, y: number, w: number, h: number}|null} box
 */
function toClient(app, box) {
  if (!box) return null;
  const geometry = app.geometry();
  const x0 = Math.max(box.x, geometry.plotX);
  const x1 = Math.min(box.x + box.w, geometry.plotX + geometry.plotW);
  const y0 = Math.max(box.y, geometry.axisH);
  const y1 = Math.min(box.y + box.h, geometry.height);
  if (x1 - x0 <= 0 || y1 - y0 <= 0) return null;
  const rect = app.ui.canvas.getBoundingClientRect();
  return { x: rect.left + x0, y: rect.top + y0, w: x1 - x0, h: y1 - y0 };
}
