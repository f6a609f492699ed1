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
    const rect = self.canvas.getBoundingClientRect();
    return { x: rect.left + x0, y: rect.top + y0, w: x1 - x0, h: y1 - y0 };
  };
  /** @type {any} */ (self.root).stwDebug = {
    /** @param {number} index payload span index */
    spanRect(index) {
      return toClient(spanBox(self.data, self.layout, self.geometry(), index));
    },
    /** @param {number} index payload event index */
    eventRect(index) {
      return toClient(eventBox(self.data, self.layout, self.geometry(), index));
    },
    /**
     * How payload item `index` is drawn: 0 hidden (a filter, toggle or query), 1 drawn, 2 dimmed.
     * @param {"span"|"event"} kind
     * @param {number} index
     */
    visibility(kind, index) {
      return (kind === "event" ? self.evVis : self.vis)[index] ?? -1;
    },
    /** @param {number} sampleIndex payload sample index */
    rowOfSample(sampleIndex) {
      return self.layout.rowOfSample[sampleIndex] ?? -1;
    },
    frameTimes() {
      return self.loop.frameLog.slice();
    },
    get firstPaintMs() {
      return self.loop.firstPaintMs;
    },
    /** Frames painted since render (frameTimes keeps the last 600). */
    get frameCount() {
      return self.loop.frameCount;
    },
    /** Frames skipped because the timeline had no width (sizing.js). */
    get skippedFrames() {
      return self.sizer.skipped;
    },
    /** Ask for a frame, as any change of state does. */
    repaint() {
      self.requestFrame();
    },
    state() {
      return {
        viewStart: self.view.t0,
        viewEnd: self.view.t1,
        sort: self.settings.sort,
        desc: self.settings.desc,
        filter: self.settings.filter,
        attempt: self.settings.attempt,
        attemptMode: self.settings.attemptMode,
        showEvents: self.settings.showEvents,
        showOpen: self.settings.showOpen,
        showUnmatched: self.settings.showUnmatched,
        laneHeight: self.settings.laneH,
        expandAll: self.settings.expandAll,
        expanded: [...self.expanded],
        collapsed: [...self.collapsed],
        highlight: self.highlight >= 0 ? nameOf(self.data, self.highlight) : null,
        cursor: Number.isFinite(self.cursor) ? self.cursor : null,
        brush: self.brush ? [...self.brush] : null,
        selected: self.selection ? self.selectedValue(self.selection) : null,
        rows: self.rows.length,
        scrollTop: self.scrollEl.scrollTop,
        counts: self.counts ? { notStarted: self.counts.notStarted, running: self.counts.running, ended: self.counts.ended } : null,
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
      const clampedRow = Math.max(0, Math.min(self.rows.length - 1, row));
      self.scrollEl.scrollTop = self.layout.rowTop[clampedRow] ?? 0;
      self.requestFrame();
    },
    /**
     * What is at a client point (for tests).
     * @param {number} clientX
     * @param {number} clientY
     */
    hitAt(clientX, clientY) {
      const rect = self.canvas.getBoundingClientRect();
      return self.hitAt(clientX - rect.left, clientY - rect.top);
    },
    selectionRect() {
      return toClient(hitBox(self.data, self.layout, self.geometry(), self.selection));
    },
    /** The rollout diff: pair, rows, the focused name and side (diff_panel.js). */
    diff() {
      return self.diff.debugState();
    },
    /** Link arrows of the selection as last painted: kind, ends, client px (docs/payload.md). */
    links() {
      const rect = self.canvas.getBoundingClientRect();
      return (self.arrows || []).map((arrow) => ({ ...arrow, x0: rect.left + arrow.x0, y0: rect.top + arrow.y0, x1: rect.left + arrow.x1, y1: rect.top + arrow.y1 }));
    },
    /** Spans drawn, dimmed and hidden (the views' focus masks dim). */
    visCounts() {
      const counts = [0, 0, 0];
      for (const visibility of self.vis) counts[visibility]++;
      return { hidden: counts[0], shown: counts[1], dimmed: counts[2] };
    },
    /** The critical path shown: payload span (and segment, -1 none) indices, names and exclusive seconds, in time order. */
    critical() {
      const cv = self.critical;
      return cv ? { on: self.settings.critical, sample: cv.sample, path: cv.path.map((step) => ({ span: step.span, seg: step.seg, name: stepName(self.data, step), critical: step.critical })) } : null;
    },
    /** The flame view: its frames (figures, client rects) and the chosen path. */
    flame() {
      return self.flameView ? self.flameView.debug() : null;
    },
    /**
     * The labels of payload sample `sampleIndex`'s lanes when expanded, `{text, names, role}` (lane 0 shows the sample's own label).
     * @param {number} sampleIndex
     */
    laneLabels(sampleIndex) {
      const data = self.data;
      if (!(sampleIndex >= 0 && sampleIndex < data.nSamples)) return [];
      const base = data.laneBase[sampleIndex];
      return Array.from({ length: data.nLanes[sampleIndex] }, (_, lane) => ({ ...laneLabel(data, base + lane) }));
    },
    /** The engines' load tracks as drawn: mode, and each track's label, value at the cursor (null) and client rect. */
    tracks() {
      const geometry = self.geometry();
      const rect = self.canvas.getBoundingClientRect();
      const readings = trackReadings(self.data.load, self.settings.loadSplit, geometry, self.cursor);
      return {
        split: self.settings.loadSplit,
        height: geometry.tracksH,
        tracks: readings.map((reading) => ({
          label: reading.label,
          track: reading.series.track,
          engine: reading.series.engine < 0 ? null : self.data.load.engines[reading.series.engine] ?? null,
          value: Number.isNaN(reading.value) ? null : reading.value,
          rect: { x: rect.left + reading.box.x, y: rect.top + reading.box.y, w: reading.box.w, h: reading.box.h },
        })),
      };
    },
    /** The samples' fates as shown: colouring, counts, ledger bars and 90%-finished markers (panels/fate_view.js). */
    fates() {
      return self.fates ? self.fates.debug() : null;
    },
    /**
     * Row `row`'s background and fate strip colours (as if neither selected nor hovered).
     * @param {number} row
     */
    rowFill(row) {
      return self.fates ? self.fates.rowFill(row) : null;
    },
    /** Pieces of the engine band painted in the last frame (collapsed rows). */
    get bandPieces() {
      return self.painter.band.drawn;
    },
  };
}
