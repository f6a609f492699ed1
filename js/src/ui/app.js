// One rendered view of the widget. Its state is split by job, each part an
// object of its own: `ui` the DOM skeleton (shell.js), `viewState` what
// `view_state` saves (viewstate.js), `shown` the decoded payload and what of it
// is shown (shown.js), `pointer` the cursor, brush, selection and hover
// (pointer.js), `views` the views over the timeline (views.js), `drawing` the
// painter, overview, theme and frame loop (drawing.js). The App wires them:
// data -> layout -> frame, user input, and the model's traits (`selected`,
// `view_range`, `view_state`, `payload`, `height`, traits.js).

import { hitTest, timeAt } from "../render/hit.js";
import { Interaction } from "./interact.js";
import { Controls, controlsInfo } from "./controls.js";
import { renderLegend } from "../panels/legend.js";
import { brushSummary, renderStatsBar, renderBrushPanel } from "../panels/stats.js";
import { watchTheme } from "./theme.js";
import { Sync, Requests } from "../data/model.js";
import { buildShell, updateSide } from "./shell.js";
import { ViewState, validRange, restoreViewState, viewStateOf, highlightIn } from "./viewstate.js";
import { selectedValue, selectsSame, hitOfSelected, loadDetails } from "./selection.js";
import { sampleRowId } from "../data/decode.js";
import { followTraits } from "./traits.js";
import { pointAt } from "./tooltip.js";
import { Views } from "./views.js";
import { ShownTrace } from "./shown.js";
import { PointerState } from "./pointer.js";
import { Drawing, paintFrame } from "./drawing.js";
import { viewportHeight, AXIS_H } from "../render/sizing.js";
import { tracksHeight } from "../render/tracks.js";
import { clampWindow, zoomedWindow, fitRange, focusWindow, scrollToShow } from "../render/viewport.js";
import { attachLive } from "../live/live_view.js";

/** @typedef {import("../data/model.js").AnyModel} AnyModel */
/** @typedef {import("../render/hit.js").Hit} Hit */
/** @typedef {import("../render/hit.js").Geo} Geo */
/** @typedef {import("./controls.js").Settings} Settings */
/** @typedef {import("../data/filters.js").ViewMasks} ViewMasks */

export class App {
  /**
   * @param {AnyModel} model
   * @param {HTMLElement} host
   * @param {number} t0 performance.now() when render() was called
   */
  constructor(model, host, t0) {
    this.model = model;
    this.sync = new Sync(model);
    this.requests = new Requests(model);
    this.ui = buildShell(host);
    this.viewState = new ViewState();
    this.shown = new ShownTrace(this.sync.get("payload"), this.viewState.settings.laneH);
    restoreViewState(this.viewState, this.sync.get("view_state"), this.shown.data.names);
    this.pointer = new PointerState();
    this.views = new Views();
    this.drawing = new Drawing(this.ui, this.shown.data, t0, () => paintFrame(this), {
      view: () => this.viewState.timeWindow,
      setView: (start, end) => {
        this.setView(start, end);
        this.userView();
      },
      plot: () => {
        const geometry = this.geometry();
        return { plotX: geometry.plotX, plotW: geometry.plotW };
      },
    });
    this.controls = new Controls(this.ui.headerEl, {
      change: (patch) => this.changeSettings(patch),
      fitAll: () => this.fit(false),
      fitFiltered: () => this.fit(true),
    });
    this.showData();
    this.restoreView();
    /** @type {Array<() => void>} undo what `listen` set up */
    this.stopListening = this.listen();
    /** a live rollout's updates (live/), null for a dump */
    this.live = attachLive(this);
    // The view, reachable from its root element by tools that inspect a page under
    // test (docs/payload.md, "Testing hooks"); nothing in the package reads it.
    /** @type {HTMLElement & {stwApp?: App}} */ (this.ui.root).stwApp = this;
    this.requestFrame();
  }

  /** The payload shown, its views, and where the saved state says the view was. */
  showData() {
    this.shown.updateVisibility(this.viewState.settings, this.viewState.highlight);
    this.refilter();
    this.views.attach(this, this.ui.flameEl, this.ui.ledgerEl);
  }

  restoreView() {
    const vr = this.sync.get("view_range");
    const vs = this.sync.get("view_state");
    if (validRange(vr)) this.setView(vr[0], vr[1]);
    else if (vs && validRange(vs.view)) this.setView(vs.view[0], vs.view[1]);
    else this.fit(false, true);
    if (vs && Number.isFinite(vs.cursor)) this.setCursor(vs.cursor, true);
    if (vs && typeof vs.scroll_top === "number") this.viewState.pendingScroll = vs.scroll_top;
    this.renderLegend();
    this.renderStats();
    this.updateControls();
    const sel = this.sync.get("selected");
    if (sel && typeof sel === "object" && "kind" in sel) this.applySelectedFromModel(sel);
  }

  /**
   * User input, the observers and the model's events.
   * @returns {Array<() => void>} what undoes each
   */
  listen() {
    const { ui } = this;
    const interaction = new Interaction(ui.canvas, ui.root, {
      geometry: () => this.geometry(),
      hit: (x, y) => this.hitAt(x, y),
      panPx: (dx) => this.panPx(dx),
      zoomAt: (x, factor) => this.zoomAt(x, factor),
      setCursor: (time) => this.setCursor(time),
      select: (hit) => this.select(hit),
      toggleRow: (row) => this.toggleRow(row),
      hover: (hit, cx, cy) => this.setHover(hit, cx, cy),
      brush: (range, fin) => this.setBrush(range, fin),
      focusSelection: () => this.focusSelection(),
      escape: () => this.escape(),
      focusFilter: () => this.controls.focusFilter(),
      scrollBy: (dy) => {
        ui.scrollEl.scrollTop += dy;
      },
      userView: () => this.userView(),
    });
    const onScroll = () => {
      ui.tooltip.hidden = true;
      this.requestFrame();
      this.saveViewState();
    };
    ui.scrollEl.addEventListener("scroll", onScroll, { passive: true });
    const resized = typeof ResizeObserver !== "undefined" ? new ResizeObserver(() => this.requestFrame()) : null;
    resized?.observe(ui.scrollEl);
    resized?.observe(ui.root);
    // Browser zoom and moving between screens change devicePixelRatio.
    const onWinResize = () => this.requestFrame();
    window.addEventListener("resize", onWinResize);
    return [
      () => interaction.dispose(),
      () => resized?.disconnect(),
      watchTheme(ui.root, () => this.reTheme()),
      () => ui.scrollEl.removeEventListener("scroll", onScroll),
      () => window.removeEventListener("resize", onWinResize),
      followTraits(this),
    ];
  }

  // ------------------------------------------------------------ state

  /** The `view_state` value (docs/payload.md). */
  viewStateValue() {
    return viewStateOf(this.viewState, this.shown.data.names, this.viewState.timeWindow, this.pointer.cursor, this.ui.scrollEl.scrollTop);
  }

  saveViewState() {
    this.sync.setLater("view_state", () => this.viewStateValue(), 250);
  }

  /** @param {Partial<Settings>} patch */
  changeSettings(patch) {
    const settings = this.viewState.settings;
    const before = { ...settings };
    Object.assign(settings, patch);
    if (patch.expandAll !== undefined && patch.expandAll !== before.expandAll) {
      this.viewState.expanded.clear();
      this.viewState.collapsed.clear();
    }
    const visChanged = settings.showEvents !== before.showEvents || settings.showOpen !== before.showOpen || settings.showUnmatched !== before.showUnmatched || settings.attempt !== before.attempt || settings.attemptMode !== before.attemptMode;
    if (visChanged) this.recomputeVis();
    if (settings.filter !== before.filter) this.views.query?.run(settings.filter); // its masks refilter the rows (setMasks)
    if (settings.sort !== before.sort || settings.desc !== before.desc) this.refilter();
    else if (settings.laneH !== before.laneH || settings.expandAll !== before.expandAll || settings.loadSplit !== before.loadSplit) this.relayout();
    if (visChanged) this.afterVisChange();
    if (patch.diff !== undefined || patch.diffPair !== undefined) this.views.diff?.render();
    if (settings.critical !== before.critical) this.views.critical?.update();
    if (settings.flame !== before.flame) this.views.flameView?.show();
    if (settings.colorBy !== before.colorBy) this.views.fates?.update();
    this.updateControls();
    this.saveViewState();
    this.requestFrame();
  }

  /**
   * Replace some of the views' masks and redraw; rows are refiltered only when
   * `rowKeep` changes.
   * @param {Partial<ViewMasks>} patch
   */
  setMasks(patch) {
    const rowsChanged = this.shown.patchMasks(patch);
    this.recomputeVis();
    if (rowsChanged) this.refilter();
    this.afterVisChange();
    this.requestFrame();
  }

  recomputeVis() {
    this.shown.updateVisibility(this.viewState.settings, this.viewState.highlight);
  }

  afterVisChange() {
    this.recount();
    this.renderStats();
    this.recomputeBrush();
  }

  /** The counts at the cursor, when there is one. */
  recount() {
    if (Number.isFinite(this.pointer.cursor)) this.pointer.counts = this.shown.countsAt(this.pointer.cursor);
  }

  /** Filter + sort -> rows; then layout, histogram, counts. */
  refilter() {
    const { shown } = this;
    shown.updateRows(this.viewState.settings);
    this.drawing.overview.setData(shown.hist, shown.data.globalStart, shown.data.globalEnd);
    this.relayout();
    if (this.pointer.hoverRow >= shown.rows.length) this.pointer.hoverRow = -1;
    this.afterVisChange();
  }

  relayout() {
    this.shown.updateLayout(this.viewState.settings.laneH, (rowId) => this.viewState.isExpanded(rowId));
    this.sizeViewport();
  }

  sizeViewport() {
    const head = AXIS_H + tracksHeight(this.shown.data.load, this.viewState.settings.loadSplit); // axis and load tracks
    const totalHeight = this.shown.layout.totalHeight;
    const want = viewportHeight(totalHeight, this.sync.get("height"), head);
    this.drawing.viewportH = want;
    this.ui.scrollEl.style.height = `${want}px`;
    this.ui.spacer.style.height = `${Math.max(0, head + totalHeight - want)}px`;
  }

  // ------------------------------------------------------------ view

  /**
   * @param {number} [width] CSS px, the live width by default
   * @returns {Geo}
   */
  geometry(width = this.drawing.sizer.current()) {
    const gutter = Math.round(Math.max(120, Math.min(this.drawing.labelWidth(this.shown.data) + 36, 300, width * 0.26)));
    const plotX = gutter + 8;
    const tracksH = tracksHeight(this.shown.data.load, this.viewState.settings.loadSplit);
    const { t0, t1 } = this.viewState.timeWindow;
    return { width, height: this.drawing.viewportH, gutter, plotX, plotW: Math.max(40, width - plotX - 12), axisH: AXIS_H + tracksH, tracksH, scrollTop: this.ui.scrollEl.scrollTop, t0, t1 };
  }

  /**
   * @param {number} start
   * @param {number} end
   */
  setView(start, end) {
    this.viewState.timeWindow = clampWindow(this.shown.data, start, end);
    this.requestFrame();
  }

  /** A user pan/zoom ended (or happened): write view_range and view_state, debounced. */
  userView() {
    this.sync.setLater("view_range", () => [this.viewState.timeWindow.t0, this.viewState.timeWindow.t1], 200);
    this.saveViewState();
  }

  /** @param {number} dx */
  panPx(dx) {
    const { t0, t1 } = this.viewState.timeWindow;
    const dt = (dx * (t1 - t0)) / this.geometry().plotW;
    this.setView(t0 - dt, t1 - dt);
  }

  /**
   * @param {number} x
   * @param {number} factor
   */
  zoomAt(x, factor) {
    const time = timeAt(this.geometry(), x);
    const timeWindow = zoomedWindow(this.viewState.timeWindow, time, factor);
    if (!timeWindow) return;
    this.setView(timeWindow[0], timeWindow[1]);
    // Keep the time under the pointer in place despite clamping.
    const drift = timeAt(this.geometry(), x) - time;
    const shown = this.viewState.timeWindow;
    if (Math.abs(drift) > 1e-12 && Number.isFinite(drift)) this.viewState.timeWindow = { t0: shown.t0 - drift, t1: shown.t1 - drift };
  }

  /**
   * @param {boolean} filtered fit the filtered rows (else everything)
   * @param {boolean} [silent] do not write view_range
   */
  fit(filtered, silent = false) {
    const [start, end] = fitRange(this.shown.data, filtered ? this.shown.rows : null);
    this.setView(start, end);
    if (!silent) this.userView();
  }

  // ------------------------------------------------------------ interaction

  /**
   * @param {number} x
   * @param {number} y
   */
  hitAt(x, y) {
    const { data, layout, vis, evVis } = this.shown;
    return hitTest(data, layout, this.geometry(), vis, evVis, x, y);
  }

  /**
   * @param {number} time
   * @param {boolean} [silent]
   */
  setCursor(time, silent = false) {
    this.pointer.cursor = time;
    this.recount();
    this.renderStats();
    if (!silent) this.saveViewState();
    this.requestFrame();
  }

  /**
   * @param {[number, number]|null} range
   * @param {boolean} final
   */
  setBrush(range, final) {
    const pointer = this.pointer;
    pointer.brush = range;
    if (final && range) {
      const { t0, t1 } = this.viewState.timeWindow;
      if ((Math.abs(range[1] - range[0]) * this.geometry().plotW) / (t1 - t0) < 3) pointer.brush = null;
    }
    if (final) this.recomputeBrush();
    this.requestFrame();
  }

  recomputeBrush() {
    // Rows, visibility and the range changed (or may have): the flame view rebuilds if its inputs did.
    this.views.flameView?.changed();
    this.views.diff?.changed();
    this.views.fates?.changed();
    const { pointer, shown } = this;
    if (!pointer.brush) {
      pointer.brushSum = null;
      this.ui.brushEl.replaceChildren();
      this.updateSide();
      return;
    }
    const [from, to] = pointer.brush;
    pointer.brushSum = brushSummary(shown.data, shown.rows, shown.vis, Math.min(from, to), Math.max(from, to));
    renderBrushPanel(
      this.ui.brushEl,
      shown.data,
      pointer.brushSum,
      () => this.setBrush(null, true),
      (nameIndex) => this.toggleHighlight(nameIndex),
    );
    this.updateSide();
  }

  /** @param {Hit|null} hit */
  select(hit) {
    this.pointer.selection = hit;
    this.selectionChanged();
    this.requestFrame();
    if (!hit) {
      this.clearDetails();
      this.sync.setNow("selected", {});
      return;
    }
    this.sync.setNow("selected", this.selectedValue(hit));
    loadDetails(this, hit);
  }

  /** No selection: no details request, an empty details panel. */
  clearDetails() {
    this.pointer.dropSelection();
    this.ui.detailsEl.replaceChildren();
    this.updateSide();
  }

  /**
   * The `selected` value for a hit (docs/payload.md).
   * @param {Hit} hit
   */
  selectedValue(hit) {
    return selectedValue(this.shown.data, hit);
  }

  /** The views that follow the selection: the critical path; a timeline item replaces a flame frame. */
  selectionChanged() {
    if (this.pointer.selection) this.views.flameView?.dropPath();
    this.views.critical?.update();
  }

  /** @param {any} sel `selected` from the kernel */
  applySelectedFromModel(sel) {
    const { data, layout } = this.shown;
    if (sel && sel.kind === "flame") {
      this.views.flameView?.fromModel(sel);
      return;
    }
    if (!sel || !("kind" in sel)) {
      this.views.flameView?.dropPath();
      if (this.pointer.selection) {
        this.pointer.selection = null;
        this.selectionChanged();
        this.clearDetails();
        this.requestFrame();
      }
      return;
    }
    if (selectsSame(data, this.pointer.selection, sel)) return;
    const hit = hitOfSelected(data, layout, sel);
    if (!hit) return;
    this.pointer.selection = hit;
    this.selectionChanged();
    loadDetails(this, hit);
    this.requestFrame();
  }

  focusSelection() {
    const hit = this.pointer.selection;
    const timeWindow = focusWindow(this.shown.data, hit, this.viewState.timeWindow, this.pointer.cursor);
    if (!timeWindow) return;
    this.setView(timeWindow[0], timeWindow[1]);
    if (hit && "sample" in hit) this.scrollRowIntoView(this.shown.layout.rowOfSample[hit.sample]);
    this.userView();
  }

  /** @param {number} row */
  scrollRowIntoView(row) {
    const scrollEl = this.ui.scrollEl;
    const top = scrollToShow(this.shown.layout.rowTop, row, scrollEl.scrollTop, this.drawing.viewportH - this.geometry().axisH);
    if (top !== null) scrollEl.scrollTop = top;
  }

  escape() {
    const pointer = this.pointer;
    if (this.views.flameView?.escape()) return;
    if (pointer.selection || pointer.brush) {
      if (pointer.brush) this.setBrush(null, true);
      if (pointer.selection) this.select(null);
      else this.sync.setNow("selected", {});
    } else if (Number.isFinite(pointer.cursor)) {
      pointer.cursor = NaN;
      pointer.counts = null;
      this.renderStats();
      this.saveViewState();
    } else if (this.viewState.highlight >= 0) {
      this.toggleHighlight(this.viewState.highlight);
    }
    this.ui.tooltip.hidden = true;
    this.requestFrame();
  }

  /** @param {number} row */
  toggleRow(row) {
    const { data, layout } = this.shown;
    const sample = this.shown.rows[row];
    if (sample === undefined || data.nLanes[sample] <= 1) return;
    this.viewState.toggleExpanded(sampleRowId(data, sample));
    // Keep the clicked row where it is on screen.
    const scrollEl = this.ui.scrollEl;
    const offset = layout.rowTop[row] - scrollEl.scrollTop;
    this.relayout();
    scrollEl.scrollTop = Math.max(0, this.shown.layout.rowTop[row] - offset);
    this.saveViewState();
    this.requestFrame();
  }

  /** @param {number} nameIndex */
  toggleHighlight(nameIndex) {
    this.viewState.highlight = this.viewState.highlight === nameIndex ? -1 : nameIndex;
    this.recomputeVis();
    this.afterVisChange();
    this.renderLegend();
    this.saveViewState();
    this.requestFrame();
  }

  /**
   * @param {Hit|null} hit
   * @param {number} clientX
   * @param {number} clientY
   */
  setHover(hit, clientX, clientY) {
    if (pointAt(this.pointer, this.ui, this.shown.data, hit, clientX, clientY)) this.requestFrame();
  }

  // ------------------------------------------------------------ payload

  /**
   * A new payload (the model's, or a live view's next one): shown in place, the zoom
   * kept when it still shows some of the new data; `keep` maps the selection into it
   * (live/keep.js), else the selection is cleared.
   * @param {any} [payload]
   * @param {((old: import("../data/decode.js").Data, next: import("../data/decode.js").Data, hit: Hit) => Hit|null)|null} [keep]
   */
  replacePayload(payload = this.sync.get("payload"), keep = null) {
    const oldView = this.viewState.timeWindow;
    const oldData = this.shown.data;
    const hadSel = !!this.pointer.selection;
    this.shown.replace(payload);
    const data = this.shown.data;
    this.drawing.newData(data);
    this.viewState.highlight = highlightIn(this.viewState.highlight, oldData.names, data.names);
    this.pointer.hover = null;
    this.pointer.hoverRow = -1;
    const kept = keep && this.pointer.selection ? keep(oldData, data, this.pointer.selection) : null;
    if (kept) this.pointer.selection = kept;
    else this.clearDetails();
    this.recomputeVis();
    this.refilter();
    this.views.query?.run(this.viewState.settings.filter);
    this.views.critical?.update();
    if (oldView.t1 > data.globalStart && oldView.t0 < data.globalEnd) this.setView(oldView.t0, oldView.t1);
    else this.fit(false, true);
    this.recount();
    this.renderLegend();
    this.renderStats();
    this.updateControls();
    this.views.diff?.render();
    this.updateSide();
    if (hadSel && !kept) this.sync.setNow("selected", {});
    this.requestFrame();
  }

  // ------------------------------------------------------------ DOM bits

  renderLegend() {
    const { data, legend } = this.shown;
    renderLegend(this.ui.legendEl, data, legend, this.viewState.highlight, (nameIndex) => this.toggleHighlight(nameIndex), this.views.fates?.legendCounts() ?? null);
  }

  renderStats() {
    renderStatsBar(this.ui.statsEl, this.shown.data, this.pointer.counts, this.shown.rows.length, (nameIndex) => this.toggleHighlight(nameIndex));
  }

  updateControls() {
    this.controls.update(this.viewState.settings, controlsInfo(this.shown.data, this.shown.rows.length, this.views.query?.result ?? null));
  }

  updateSide() {
    updateSide(this.ui);
  }

  reTheme() {
    this.drawing.retheme(this.ui.root, this.shown.data);
    this.views.flameView?.draw();
    this.requestFrame();
  }

  // ------------------------------------------------------------ frames

  requestFrame() {
    this.drawing.loop.request();
  }

  dispose() {
    this.drawing.loop.dispose();
    this.sync.flush();
    this.drawing.overview.dispose();
    this.controls.dispose();
    this.views.flameView?.dispose();
    this.views.fates?.dispose();
    this.requests.dispose();
    for (const stop of this.stopListening) stop();
    this.live?.dispose();
    this.ui.root.remove();
  }
}
