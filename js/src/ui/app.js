// One rendered view of the widget: owns the view state and wires data ->
// layout -> frame and the model's traits (`selected`, `view_range`,
// `view_state`, `payload`, `height`) to it. The DOM skeleton (shell.js), view
// state (viewstate.js), selection values (selection.js), tooltip, frame loop
// and test hooks (debug.js) live in their own modules.

import { decodePayload, sampleRowId } from "../data/decode.js";
import { allSamples, sortRows, buildLayout } from "../data/layout.js";
import { spanVisibility, eventVisibility } from "../data/filters.js";
import { hitTest, timeAt } from "../render/hit.js";
import { Painter } from "../render/draw.js";
import { paintEmpty } from "../render/margins.js";
import { ColorTable } from "../render/colors.js";
import { Overview, activeHistogram } from "../panels/overview.js";
import { Interaction } from "./interact.js";
import { Controls, controlsInfo } from "./controls.js";
import { legendInfo, renderLegend } from "../panels/legend.js";
import { cursorCounts, brushSummary, renderStatsBar, renderBrushPanel } from "../panels/stats.js";
import { hostTheme, watchTheme } from "./theme.js";
import { Sync, Requests } from "../data/model.js";
import { buildShell, updateSide, updateFooter } from "./shell.js";
import { defaultSettings, validRange, restoreViewState, viewStateOf } from "./viewstate.js";
import { selectedValue, selectsSame, hitOfSelected, loadDetails } from "./selection.js";
import { followTraits } from "./traits.js";
import { pointAt } from "./tooltip.js";
import { FrameLoop } from "../render/frameloop.js";
import { installDebug } from "./debug.js";
import { attachViews } from "./views.js";
import { Sizer, viewportHeight, AXIS_H, OVERVIEW_H, MAX_VIEWPORT_H } from "../render/sizing.js";
import { tracksHeight } from "../render/tracks.js";
import { clampWindow, zoomedWindow, fitRange, focusWindow, scrollToShow, labelWidthOf } from "../render/viewport.js";
import { arrowsFor, paintArrows } from "../render/arrows.js";
import { noteMasks } from "../data/links.js";

/** @typedef {import("../data/model.js").AnyModel} AnyModel */
/** @typedef {import("../render/hit.js").Hit} Hit */
/** @typedef {import("../render/hit.js").Geo} Geo */
/** @typedef {import("./controls.js").Settings} Settings */
/** @typedef {import("../data/decode.js").Data} Data */
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
    /** @type {Settings} */
    this.settings = defaultSettings();
    /** @type {Set<number>} sample row ids expanded (when not expand-all) */
    this.expanded = new Set();
    /** @type {Set<number>} sample row ids collapsed (when expand-all) */
    this.collapsed = new Set();
    this.highlight = -1;
    this.view = { t0: 0, t1: 1 };
    this.cursor = NaN;
    /** @type {[number, number]|null} */
    this.brush = null;
    /** @type {import("../panels/stats.js").BrushSummary|null} */
    this.brushSum = null;
    /** @type {Hit|null} */
    this.selection = null;
    /** @type {Hit|null} */
    this.hover = null;
    this.hoverRow = -1;
    this.pendingReq = -1;
    this.loop = new FrameLoop(() => this.frame(), t0);
    this.viewportH = MAX_VIEWPORT_H;
    this.labelW = -1;
    /** @type {number|undefined} scroll offset restored from view_state on the first frame */
    this.pendingScroll = undefined;
    /** @type {import("../panels/stats.js").CursorCounts|null} */
    this.counts = null;
    /** @type {ViewMasks} the views' masks over payload items (see setMasks) */
    this.masks = { keep: null, evKeep: null, rowKeep: null, focus: null, evFocus: null };
    /** @type {string|null} the flame frame chosen (its name path) */
    this.flamePath = null;
    /** @type {import("../panels/critical_panel.js").CriticalView|null} */
    this.critical = null;
    /** @type {import("../panels/icicle.js").FlameView|null} */
    this.flameView = null;
    /** @type {import("../panels/fate_view.js").FateView|null} the ledger bars and rows coloured by fate */
    this.fates = null;

    // ---- DOM
    const ui = buildShell(host);
    const root = ui.root;
    this.root = root;
    this.headerEl = ui.headerEl;
    this.statsEl = ui.statsEl;
    this.legendEl = ui.legendEl;
    this.mainEl = ui.mainEl;
    this.ovCanvas = ui.ovCanvas;
    this.scrollEl = ui.scrollEl;
    this.canvas = ui.canvas;
    this.spacer = ui.spacer;
    this.tooltip = ui.tooltip;
    this.sideEl = ui.sideEl;
    this.detailsEl = ui.detailsEl;
    this.brushEl = ui.brushEl;
    this.diffEl = ui.diffEl;
    this.criticalEl = ui.criticalEl;
    this.footerEl = ui.footerEl;
    this.footerView = ui.footerView;

    this.sizer = new Sizer(() => this.scrollEl.clientWidth || this.mainEl.clientWidth, () => this.requestFrame());
    this.theme = hostTheme(root);
    this.painter = new Painter(this.canvas);
    this.overview = new Overview(this.ovCanvas, {
      view: () => this.view,
      setView: (start, end) => {
        this.setView(start, end);
        this.userView();
      },
      plot: () => {
        const geometry = this.geometry();
        return { plotX: geometry.plotX, plotW: geometry.plotW };
      },
    });
    this.controls = new Controls(this.headerEl, {
      change: (patch) => this.changeSettings(patch),
      fitAll: () => this.fit(false),
      fitFiltered: () => this.fit(true),
    });

    // ---- data and saved state
    /** @type {Data} */
    this.data = decodePayload(this.sync.get("payload"));
    this.restoreState(this.sync.get("view_state"));
    this.colors = new ColorTable(this.data.names, this.theme);
    this.legend = legendInfo(this.data);
    /** @type {Uint32Array} */
    this.rows = new Uint32Array(0);
    this.layout = buildLayout(this.data, this.rows, () => false, this.settings.laneH);
    /** @type {Uint8Array} */
    this.vis = new Uint8Array(0);
    /** @type {Uint8Array} */
    this.evVis = new Uint8Array(0);
    /** @type {Float32Array} */
    this.hist = new Float32Array(0);
    this.recomputeVis();
    this.refilter();
    const views = attachViews(this, ui.flameEl, ui.ledgerEl);
    this.query = views.query;
    this.diff = views.diff;
    this.critical = views.critical;
    this.flameView = views.flameView;
    const vr = this.sync.get("view_range");
    const vs = this.sync.get("view_state");
    if (validRange(vr)) this.setView(vr[0], vr[1]);
    else if (vs && validRange(vs.view)) this.setView(vs.view[0], vs.view[1]);
    else this.fit(false, true);
    if (vs && Number.isFinite(vs.cursor)) this.setCursor(vs.cursor, true);
    if (vs && typeof vs.scroll_top === "number") this.pendingScroll = vs.scroll_top;
    this.renderLegend();
    this.renderStats();
    this.updateControls();
    const sel = this.sync.get("selected");
    if (sel && typeof sel === "object" && "kind" in sel) this.applySelectedFromModel(sel);

    // ---- interaction, observers, model events
    this.interaction = new Interaction(this.canvas, root, {
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
        this.scrollEl.scrollTop += dy;
      },
      userView: () => this.userView(),
    });
    this.onScroll = () => {
      this.tooltip.hidden = true;
      this.requestFrame();
      this.saveViewState();
    };
    this.scrollEl.addEventListener("scroll", this.onScroll, { passive: true });
    this.ro = typeof ResizeObserver !== "undefined" ? new ResizeObserver(() => this.requestFrame()) : null;
    this.ro?.observe(this.scrollEl);
    this.ro?.observe(root);
    this.stopTheme = watchTheme(root, () => this.reTheme());
    // Browser zoom and moving between screens change devicePixelRatio.
    this.onWinResize = () => this.requestFrame();
    window.addEventListener("resize", this.onWinResize);

    this.unfollow = followTraits(this);

    installDebug(this);
    this.requestFrame();
  }

  // ------------------------------------------------------------ state

  /** @param {any} vs */
  restoreState(vs) {
    restoreViewState(this, vs, this.data.names);
  }

  /** The `view_state` value (docs/payload.md). */
  viewState() {
    return viewStateOf(this, this.data.names, this.view, this.cursor, this.scrollEl.scrollTop);
  }

  saveViewState() {
    this.sync.setLater("view_state", () => this.viewState(), 250);
  }

  /** @param {Partial<Settings>} patch */
  changeSettings(patch) {
    const before = { ...this.settings };
    Object.assign(this.settings, patch);
    const settings = this.settings;
    if (patch.expandAll !== undefined && patch.expandAll !== before.expandAll) {
      this.expanded.clear();
      this.collapsed.clear();
    }
    const visChanged = settings.showEvents !== before.showEvents || settings.showOpen !== before.showOpen || settings.showUnmatched !== before.showUnmatched || settings.attempt !== before.attempt || settings.attemptMode !== before.attemptMode;
    if (visChanged) this.recomputeVis();
    if (settings.filter !== before.filter) this.query.run(settings.filter); // its masks refilter the rows (setMasks)
    if (settings.sort !== before.sort || settings.desc !== before.desc) this.refilter();
    else if (settings.laneH !== before.laneH || settings.expandAll !== before.expandAll || settings.loadSplit !== before.loadSplit) this.relayout();
    if (visChanged) this.afterVisChange();
    if (patch.diff !== undefined || patch.diffPair !== undefined) this.diff.render();
    if (settings.critical !== before.critical) this.critical?.update();
    if (settings.flame !== before.flame) this.flameView?.show();
    if (settings.colorBy !== before.colorBy) this.fates?.update();
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
    const rowsChanged = "rowKeep" in patch && patch.rowKeep !== this.masks.rowKeep;
    Object.assign(this.masks, patch);
    noteMasks(this.data, this.masks);
    this.recomputeVis();
    if (rowsChanged) this.refilter();
    this.afterVisChange();
    this.requestFrame();
  }

  recomputeVis() {
    const masks = this.masks;
    const visOptions = { showOpen: this.settings.showOpen, showEvents: this.settings.showEvents, showUnmatched: this.settings.showUnmatched, attempt: this.settings.attempt, attemptMode: this.settings.attemptMode, highlightName: this.highlight, keep: masks.keep, evKeep: masks.evKeep, focus: masks.focus, evFocus: masks.evFocus };
    this.vis = spanVisibility(this.data, visOptions);
    this.evVis = eventVisibility(this.data, visOptions);
  }

  afterVisChange() {
    if (Number.isFinite(this.cursor)) this.counts = cursorCounts(this.data, this.rows, this.vis, this.cursor);
    this.renderStats();
    this.recomputeBrush();
  }

  /** Filter + sort -> rows; then layout, histogram, counts. */
  refilter() {
    const data = this.data;
    const keepRow = this.masks.rowKeep;
    const matched = allSamples(data);
    this.rows = sortRows(data, keepRow ? matched.filter((sample) => keepRow[sample]) : matched, this.settings.sort, this.settings.desc);
    this.hist = activeHistogram(data, this.rows, data.globalStart, data.globalEnd, 400);
    this.overview.setData(this.hist, data.globalStart, data.globalEnd);
    this.relayout();
    if (this.hoverRow >= this.rows.length) this.hoverRow = -1;
    if (Number.isFinite(this.cursor)) this.counts = cursorCounts(data, this.rows, this.vis, this.cursor);
    this.renderStats();
    this.recomputeBrush();
  }

  /** @param {number} sample payload sample */
  isExpanded(sample) {
    const id = sampleRowId(this.data, sample);
    return this.settings.expandAll ? !this.collapsed.has(id) : this.expanded.has(id);
  }

  relayout() {
    this.layout = buildLayout(this.data, this.rows, (sample) => this.isExpanded(sample), this.settings.laneH);
    this.sizeViewport();
  }

  sizeViewport() {
    const head = AXIS_H + tracksHeight(this.data.load, this.settings.loadSplit); // axis and load tracks
    const want = viewportHeight(this.layout.totalHeight, this.sync.get("height"), head);
    this.viewportH = want;
    this.scrollEl.style.height = `${want}px`;
    this.spacer.style.height = `${Math.max(0, head + this.layout.totalHeight - want)}px`;
  }

  // ------------------------------------------------------------ view

  /** Width the row labels need (longest labels measured), cached per payload. */
  labelWidth() {
    const font = `12px ${this.theme.font}`;
    if (this.labelW < 0) this.labelW = labelWidthOf(this.data, (label) => this.painter.textWidth(font, label));
    return this.labelW;
  }

  /**
   * @param {number} [width] CSS px, the live width by default
   * @returns {Geo}
   */
  geometry(width = this.sizer.current()) {
    const gutter = Math.round(Math.max(120, Math.min(this.labelWidth() + 36, 300, width * 0.26)));
    const plotX = gutter + 8;
    const tracksH = tracksHeight(this.data.load, this.settings.loadSplit);
    return { width, height: this.viewportH, gutter, plotX, plotW: Math.max(40, width - plotX - 12), axisH: AXIS_H + tracksH, tracksH, scrollTop: this.scrollEl.scrollTop, t0: this.view.t0, t1: this.view.t1 };
  }

  /**
   * @param {number} start
   * @param {number} end
   */
  setView(start, end) {
    this.view = clampWindow(this.data, start, end);
    this.requestFrame();
  }

  /** A user pan/zoom ended (or happened): write view_range and view_state, debounced. */
  userView() {
    this.sync.setLater("view_range", () => [this.view.t0, this.view.t1], 200);
    this.saveViewState();
  }

  /** @param {number} dx */
  panPx(dx) {
    const geometry = this.geometry();
    const dt = (dx * (this.view.t1 - this.view.t0)) / geometry.plotW;
    this.setView(this.view.t0 - dt, this.view.t1 - dt);
  }

  /**
   * @param {number} x
   * @param {number} factor
   */
  zoomAt(x, factor) {
    const time = timeAt(this.geometry(), x);
    const timeWindow = zoomedWindow(this.view, time, factor);
    if (!timeWindow) return;
    this.setView(timeWindow[0], timeWindow[1]);
    // Keep the time under the pointer in place despite clamping.
    const g2 = this.geometry();
    const drift = timeAt(g2, x) - time;
    if (Math.abs(drift) > 1e-12 && Number.isFinite(drift)) this.view = { t0: this.view.t0 - drift, t1: this.view.t1 - drift };
  }

  /**
   * @param {boolean} filtered fit the filtered rows (else everything)
   * @param {boolean} [silent] do not write view_range
   */
  fit(filtered, silent = false) {
    const [start, end] = fitRange(this.data, filtered ? this.rows : null);
    this.setView(start, end);
    if (!silent) this.userView();
  }

  // ------------------------------------------------------------ interaction

  /**
   * @param {number} x
   * @param {number} y
   */
  hitAt(x, y) {
    return hitTest(this.data, this.layout, this.geometry(), this.vis, this.evVis, x, y);
  }

  /**
   * @param {number} time
   * @param {boolean} [silent]
   */
  setCursor(time, silent = false) {
    this.cursor = time;
    this.counts = cursorCounts(this.data, this.rows, this.vis, time);
    this.renderStats();
    if (!silent) this.saveViewState();
    this.requestFrame();
  }

  /**
   * @param {[number, number]|null} range
   * @param {boolean} final
   */
  setBrush(range, final) {
    this.brush = range;
    if (final && range) {
      const geometry = this.geometry();
      if ((Math.abs(range[1] - range[0]) * geometry.plotW) / (this.view.t1 - this.view.t0) < 3) this.brush = null;
    }
    if (final) this.recomputeBrush();
    this.requestFrame();
  }

  recomputeBrush() {
    // Rows, visibility and the range changed (or may have): the flame view rebuilds if its inputs did.
    this.flameView?.changed();
    this.diff?.changed();
    this.fates?.changed();
    if (!this.brush) {
      this.brushSum = null;
      this.brushEl.replaceChildren();
      this.updateSide();
      return;
    }
    const [from, to] = this.brush;
    this.brushSum = brushSummary(this.data, this.rows, this.vis, Math.min(from, to), Math.max(from, to));
    renderBrushPanel(
      this.brushEl,
      this.data,
      this.brushSum,
      () => this.setBrush(null, true),
      (nameIndex) => this.toggleHighlight(nameIndex),
    );
    this.updateSide();
  }

  /** @param {Hit|null} hit */
  select(hit) {
    this.selection = hit;
    this.selectionChanged();
    this.requestFrame();
    if (!hit) {
      this.pendingReq = -1;
      this.detailsEl.replaceChildren();
      this.updateSide();
      this.sync.setNow("selected", {});
      return;
    }
    this.sync.setNow("selected", this.selectedValue(hit));
    loadDetails(this, hit);
  }

  /**
   * The `selected` value for a hit (docs/payload.md).
   * @param {Hit} hit
   */
  selectedValue(hit) {
    return selectedValue(this.data, hit);
  }

  /** The views that follow the selection: the critical path; a timeline item replaces a flame frame. */
  selectionChanged() {
    if (this.selection) this.flameView?.dropPath();
    this.critical?.update();
  }

  /** @param {any} sel `selected` from the kernel */
  applySelectedFromModel(sel) {
    const data = this.data;
    if (sel && sel.kind === "flame") {
      this.flameView?.fromModel(sel);
      return;
    }
    if (!sel || !("kind" in sel)) {
      this.flameView?.dropPath();
      if (this.selection) {
        this.selection = null;
        this.selectionChanged();
        this.pendingReq = -1;
        this.detailsEl.replaceChildren();
        this.updateSide();
        this.requestFrame();
      }
      return;
    }
    if (selectsSame(data, this.selection, sel)) return;
    const hit = hitOfSelected(data, this.layout, sel);
    if (!hit) return;
    this.selection = hit;
    this.selectionChanged();
    loadDetails(this, hit);
    this.requestFrame();
  }

  focusSelection() {
    const hit = this.selection;
    const timeWindow = focusWindow(this.data, hit, this.view, this.cursor);
    if (!timeWindow) return;
    this.setView(timeWindow[0], timeWindow[1]);
    if (hit && "sample" in hit) this.scrollRowIntoView(this.layout.rowOfSample[hit.sample]);
    this.userView();
  }

  /** @param {number} row */
  scrollRowIntoView(row) {
    const top = scrollToShow(this.layout.rowTop, row, this.scrollEl.scrollTop, this.viewportH - this.geometry().axisH);
    if (top !== null) this.scrollEl.scrollTop = top;
  }

  escape() {
    if (this.flameView?.escape()) return;
    if (this.selection || this.brush) {
      if (this.brush) this.setBrush(null, true);
      if (this.selection) this.select(null);
      else this.sync.setNow("selected", {});
    } else if (Number.isFinite(this.cursor)) {
      this.cursor = NaN;
      this.counts = null;
      this.renderStats();
      this.saveViewState();
    } else if (this.highlight >= 0) {
      this.toggleHighlight(this.highlight);
    }
    this.tooltip.hidden = true;
    this.requestFrame();
  }

  /** @param {number} row */
  toggleRow(row) {
    const sample = this.rows[row];
    if (sample === undefined || this.data.nLanes[sample] <= 1) return;
    const id = sampleRowId(this.data, sample);
    const set = this.settings.expandAll ? this.collapsed : this.expanded;
    if (set.has(id)) set.delete(id);
    else set.add(id);
    // Keep the clicked row where it is on screen.
    const offset = this.layout.rowTop[row] - this.scrollEl.scrollTop;
    this.relayout();
    this.scrollEl.scrollTop = Math.max(0, this.layout.rowTop[row] - offset);
    this.saveViewState();
    this.requestFrame();
  }

  /** @param {number} nameIndex */
  toggleHighlight(nameIndex) {
    this.highlight = this.highlight === nameIndex ? -1 : nameIndex;
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
    if (pointAt(this, hit, clientX, clientY)) this.requestFrame();
  }

  // ------------------------------------------------------------ payload

  replacePayload() {
    const oldView = this.view;
    const hadSel = !!this.selection;
    this.data = decodePayload(this.sync.get("payload"));
    this.labelW = -1;
    this.colors = new ColorTable(this.data.names, this.theme);
    this.legend = legendInfo(this.data);
    if (this.highlight >= this.data.names.length) this.highlight = -1;
    this.selection = null;
    this.hover = null;
    this.hoverRow = -1;
    this.pendingReq = -1;
    this.detailsEl.replaceChildren();
    // The masks index the old payload; the views that set them recompute theirs.
    this.masks = { keep: null, evKeep: null, rowKeep: null, focus: null, evFocus: null };
    this.recomputeVis();
    this.refilter();
    this.query.run(this.settings.filter);
    this.critical?.update();
    const data = this.data;
    // Keep the zoom when it still shows some of the new data.
    if (oldView.t1 > data.globalStart && oldView.t0 < data.globalEnd) this.setView(oldView.t0, oldView.t1);
    else this.fit(false, true);
    if (Number.isFinite(this.cursor)) this.counts = cursorCounts(data, this.rows, this.vis, this.cursor);
    this.renderLegend();
    this.renderStats();
    this.updateControls();
    this.diff.render();
    this.updateSide();
    if (hadSel) this.sync.setNow("selected", {});
    this.requestFrame();
  }

  // ------------------------------------------------------------ DOM bits

  renderLegend() {
    renderLegend(this.legendEl, this.data, this.legend, this.highlight, (nameIndex) => this.toggleHighlight(nameIndex), this.fates?.legendCounts() ?? null);
  }

  renderStats() {
    renderStatsBar(this.statsEl, this.data, this.counts, this.rows.length, (nameIndex) => this.toggleHighlight(nameIndex));
  }

  updateControls() {
    this.controls.update(this.settings, controlsInfo(this.data, this.rows.length, this.query?.result ?? null));
  }

  updateSide() {
    updateSide(this);
  }

  reTheme() {
    this.theme = hostTheme(this.root);
    this.colors = new ColorTable(this.data.names, this.theme);
    this.painter.resetTextCache();
    this.labelW = -1;
    this.flameView?.draw();
    this.requestFrame();
  }

  // ------------------------------------------------------------ frames

  requestFrame() {
    this.loop.request();
  }

  frame() {
    const startTime = performance.now();
    const width = this.root.clientWidth;
    this.root.classList.toggle("stw-narrow", width > 0 && width < 980);
    const frameWidth = this.sizer.frameWidth();
    if (!frameWidth) return; // no width (hidden, or the host mid theme swap): the sizer asks for another frame
    if (this.pendingScroll !== undefined) {
      this.scrollEl.scrollTop = this.pendingScroll;
      this.pendingScroll = undefined;
    }
    const geometry = this.geometry(frameWidth);
    const dpr = Math.max(1, window.devicePixelRatio || 1);
    if (this.painter.w !== geometry.width || this.painter.h !== geometry.height || this.painter.dpr !== dpr) this.painter.resize(geometry.width, geometry.height, dpr);
    if (this.overview.w !== geometry.width || this.overview.dpr !== dpr) this.overview.resize(geometry.width, OVERVIEW_H, dpr);
    const selRow = this.selection && "row" in this.selection ? this.layout.rowOfSample[this.selection.sample] ?? -1 : -1;
    const drawn = this.painter.paint({
      d: this.data,
      L: this.layout,
      g: geometry,
      vis: this.vis,
      evVis: this.evVis,
      theme: this.theme,
      colors: this.colors,
      cursor: this.cursor,
      brush: this.brush,
      selection: this.selection,
      hover: this.hover,
      hoverRow: this.hoverRow,
      selRow,
      raiseShown: this.highlight >= 0 || this.masks.focus !== null,
      loadSplit: this.settings.loadSplit,
      fates: this.fates?.frame(geometry) ?? null,
    });
    if (this.rows.length === 0) paintEmpty(this.painter, this.theme, this.data, geometry);
    /** @type {import("../render/arrows.js").Arrow[]} the selection's link arrows as last painted */
    this.arrows = arrowsFor(this.data, this.layout, geometry, this.vis, this.evVis, this.selection);
    paintArrows(this.painter.ctx, dpr, geometry, this.theme, this.arrows);
    this.overview.paint(this.theme, this.cursor);
    const dt = performance.now() - startTime;
    if (!this.sideEl.hidden) {
      const mh = this.root.classList.contains("stw-narrow") ? "" : `${this.mainEl.offsetHeight}px`;
      if (this.sideEl.style.maxHeight !== mh) this.sideEl.style.maxHeight = mh;
    }
    this.loop.record(dt);
    this.root.dataset.rows = String(this.rows.length);
    this.root.dataset.drawnRows = String(drawn);
    updateFooter(this.footerView, this.data, this.view);
    this.loop.painted(this.root);
  }

  dispose() {
    this.loop.dispose();
    this.sync.flush();
    this.interaction.dispose();
    this.overview.dispose();
    this.controls.dispose();
    this.flameView?.dispose();
    this.fates?.dispose();
    this.requests.dispose();
    this.ro?.disconnect();
    this.stopTheme();
    this.scrollEl.removeEventListener("scroll", this.onScroll);
    window.removeEventListener("resize", this.onWinResize);
    this.unfollow();
    this.root.remove();
  }
}
