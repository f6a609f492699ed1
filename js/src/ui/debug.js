// Test hooks on the root element (`root.stwDebug`, docs/payload.md "Testing
// hooks"): item rectangles in client px, rows, frame times, state, and a few
// actions. The browser tests and benchmarks drive the widget through them.

import { nameOf } from "../data/decode.js";
import { spanBox, eventBox, hitBox } from "../render/hit.js";
import { stepName } from "../data/critical.js";
import { laneLabel } from "../data/lane_labels.js";
import { trackReadings } from "../render/tracks.js";

/** @typedef {import("./app.js").App} App */

/**
 * Install `root.stwDebug` for `app`.
 * @param {App} app
 */
export function installDebug(app) {
  const self = app;
  /** @param {{x: number, y: number, w: number, h: number}|null} box */
  const toClient = (box) => {
    if (!box) return null;
    const geometry = self.geometry();
    const x0 = Math.max(box.x, geometry.plotX);
    const x1 = Math.min(box.x + box.w, geometry.plotX + geometry.plotW);
    const y0 = Math.max(box.y, geometry.axisH);
    const y1 = Math.min(box.y + box.h, geometry.height);
    if (x1 - x0 <= 0 || y1 - y0 <= 0) return null;
    const rect = self.ui.canvas.getBoundingClientRect();
    return { x: rect.left + x0, y: rect.top + y0, w: x1 - x0, h: y1 - y0 };
  };
  /** @type {any} */ (self.ui.root).stwDebug = {
    /** @param {number} index payload span index */
    spanRect(index) {
      return toClient(spanBox(self.shown.data, self.shown.layout, self.geometry(), index));
    },
    /** @param {number} index payload event index */
    eventRect(index) {
      return toClient(eventBox(self.shown.data, self.shown.layout, self.geometry(), index));
    },
    /**
     * How payload item `index` is drawn: 0 hidden (a filter, toggle or query), 1 drawn, 2 dimmed.
     * @param {"span"|"event"} kind
     * @param {number} index
     */
    visibility(kind, index) {
      return (kind === "event" ? self.shown.evVis : self.shown.vis)[index] ?? -1;
    },
    /** @param {number} sampleIndex payload sample index */
    rowOfSample(sampleIndex) {
      return self.shown.layout.rowOfSample[sampleIndex] ?? -1;
    },
    frameTimes() {
      return self.drawing.loop.frameLog.slice();
    },
    get firstPaintMs() {
      return self.drawing.loop.firstPaintMs;
    },
    /** Frames painted since render (frameTimes keeps the last 600). */
    get frameCount() {
      return self.drawing.loop.frameCount;
    },
    /** Frames skipped because the timeline had no width (sizing.js). */
    get skippedFrames() {
      return self.drawing.sizer.skipped;
    },
    /** Ask for a frame, as any change of state does. */
    repaint() {
      self.requestFrame();
    },
    state() {
      return {
        viewStart: self.viewState.timeWindow.t0,
        viewEnd: self.viewState.timeWindow.t1,
        sort: self.viewState.settings.sort,
        desc: self.viewState.settings.desc,
        filter: self.viewState.settings.filter,
        attempt: self.viewState.settings.attempt,
        attemptMode: self.viewState.settings.attemptMode,
        showEvents: self.viewState.settings.showEvents,
        showOpen: self.viewState.settings.showOpen,
        showUnmatched: self.viewState.settings.showUnmatched,
        laneHeight: self.viewState.settings.laneH,
        expandAll: self.viewState.settings.expandAll,
        expanded: [...self.viewState.expanded],
        collapsed: [...self.viewState.collapsed],
        highlight: self.viewState.highlight >= 0 ? nameOf(self.shown.data, self.viewState.highlight) : null,
        cursor: Number.isFinite(self.pointer.cursor) ? self.pointer.cursor : null,
        brush: self.pointer.brush ? [...self.pointer.brush] : null,
        selected: self.pointer.selection ? self.selectedValue(self.pointer.selection) : null,
        rows: self.shown.rows.length,
        scrollTop: self.ui.scrollEl.scrollTop,
        counts: self.pointer.counts ? { notStarted: self.pointer.counts.notStarted, running: self.pointer.counts.running, ended: self.pointer.counts.ended } : null,
      };
    },
    /**
     * @param {number} start
     * @param {number} end
     */
    setView(start, end) {
      self.setView(start, end);
      self.userView();
    },
    /** @param {number} row */
    scrollToRow(row) {
      const clampedRow = Math.max(0, Math.min(self.shown.rows.length - 1, row));
      self.ui.scrollEl.scrollTop = self.shown.layout.rowTop[clampedRow] ?? 0;
      self.requestFrame();
    },
    /**
     * What is at a client point (for tests).
     * @param {number} clientX
     * @param {number} clientY
     */
    hitAt(clientX, clientY) {
      const rect = self.ui.canvas.getBoundingClientRect();
      return self.hitAt(clientX - rect.left, clientY - rect.top);
    },
    selectionRect() {
      return toClient(hitBox(self.shown.data, self.shown.layout, self.geometry(), self.pointer.selection));
    },
    /** The rollout diff: pair, rows, the focused name and side (diff_panel.js). */
    diff() {
      return self.views.diff?.debugState() ?? null;
    },
    /** Link arrows of the selection as last painted: kind, ends, client px (docs/payload.md). */
    links() {
      const rect = self.ui.canvas.getBoundingClientRect();
      return (self.drawing.arrows || []).map((arrow) => ({ ...arrow, x0: rect.left + arrow.x0, y0: rect.top + arrow.y0, x1: rect.left + arrow.x1, y1: rect.top + arrow.y1 }));
    },
    /** Spans drawn, dimmed and hidden (the views' focus masks dim). */
    visCounts() {
      const counts = [0, 0, 0];
      for (const visibility of self.shown.vis) counts[visibility]++;
      return { hidden: counts[0], shown: counts[1], dimmed: counts[2] };
    },
    /** The critical path shown: payload span (and segment, -1 none) indices, names and exclusive seconds, in time order. */
    critical() {
      const cv = self.views.critical;
      return cv ? { on: self.viewState.settings.critical, sample: cv.sample, path: cv.path.map((step) => ({ span: step.span, seg: step.seg, name: stepName(self.shown.data, step), critical: step.critical })) } : null;
    },
    /** The flame view: its frames (figures, client rects) and the chosen path. */
    flame() {
      return self.views.flameView ? self.views.flameView.debug() : null;
    },
    /**
     * The labels of payload sample `sampleIndex`'s lanes when expanded, `{text, names, role}` (lane 0 shows the sample's own label).
     * @param {number} sampleIndex
     */
    laneLabels(sampleIndex) {
      const data = self.shown.data;
      if (!(sampleIndex >= 0 && sampleIndex < data.nSamples)) return [];
      const base = data.laneBase[sampleIndex];
      return Array.from({ length: data.nLanes[sampleIndex] }, (_, lane) => ({ ...laneLabel(data, base + lane) }));
    },
    /** The engines' load tracks as drawn: mode, and each track's label, value at the cursor (null) and client rect. */
    tracks() {
      const geometry = self.geometry();
      const rect = self.ui.canvas.getBoundingClientRect();
      const readings = trackReadings(self.shown.data.load, self.viewState.settings.loadSplit, geometry, self.pointer.cursor);
      return {
        split: self.viewState.settings.loadSplit,
        height: geometry.tracksH,
        tracks: readings.map((reading) => ({
          label: reading.label,
          track: reading.series.track,
          engine: reading.series.engine < 0 ? null : self.shown.data.load.engines[reading.series.engine] ?? null,
          value: Number.isNaN(reading.value) ? null : reading.value,
          rect: { x: rect.left + reading.box.x, y: rect.top + reading.box.y, w: reading.box.w, h: reading.box.h },
        })),
      };
    },
    /** The samples' fates as shown: colouring, counts, ledger bars and 90%-finished markers (panels/fate_view.js). */
    fates() {
      return self.views.fates ? self.views.fates.debug() : null;
    },
    /**
     * Row `row`'s background and fate strip colours (as if neither selected nor hovered).
     * @param {number} row
     */
    rowFill(row) {
      return self.views.fates ? self.views.fates.rowFill(row) : null;
    },
    /** A live rollout's state (live/live_view.js), null for a dump. */
    live() {
      return self.live ? self.live.debug() : null;
    },
    /** Pieces of the engine band painted in the last frame (collapsed rows). */
    get bandPieces() {
      return self.drawing.painter.band.drawn;
    },
  };
}
