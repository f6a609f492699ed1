// One rendered view of the widget: builds the DOM, owns the view state,
// wires data -> layout -> frame, syncs `selected` / `view_range` /
// `view_state` with the model, and exposes the testing hooks (root.stwDebug).

import { decodePayload, nameOf, sampleLabel, sourceOf, statusOf, sampleRowId, spanToPayload, spanFromPayload, evToPayload, evFromPayload, detailSpanForSegment, F_OPEN, F_ERROR, F_VIRTUAL, EV_UNMATCHED, CLIP_REASONS, clipReasonOf } from "./decode.js";
import { filterSamples, sortRows, buildLayout, SORT_KEYS } from "./layout.js";
import { spanVisibility, eventVisibility } from "./filters.js";
import { hitTest, timeAt } from "./hit.js";
import { Painter, ColorTable, spanBox, eventBox, hitBox } from "./draw.js";
import { Overview, activeHistogram } from "./overview.js";
import { Interaction } from "./interact.js";
import { Controls, LANE_MIN, LANE_MAX } from "./controls.js";
import { legendInfo, renderLegend } from "./legend.js";
import { cursorCounts, brushSummary, renderStatsBar, renderBrushPanel } from "./stats.js";
import { renderDetails } from "./panel.js";
import { readTheme, watchTheme } from "./theme.js";
import { Sync, Requests } from "./model.js";
import { formatDuration, formatNumber } from "./format.js";

/** @typedef {import("./model.js").AnyModel} AnyModel */
/** @typedef {import("./hit.js").Hit} Hit */
/** @typedef {import("./hit.js").Geo} Geo */
/** @typedef {import("./controls.js").Settings} Settings */
/** @typedef {import("./decode.js").Data} Data */

const AXIS_H = 26;
const OVERVIEW_H = 44;
const MAX_VIEWPORT_H = 560;
const MIN_VIEWPORT_H = 120;
const FRAME_LOG = 600;

/** @returns {Settings} */
function defaultSettings() {
  return { filter: "", attempt: -1, attemptMode: "filter", sort: "start", desc: false, showEvents: true, showOpen: true, showUnmatched: true, laneH: 18, expandAll: false };
}

/**
 * @param {string} tag
 * @param {string} [cls]
 * @param {string} [text]
 * @returns {HTMLElement}
 */
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** @param {any} v */
function validRange(v) {
  return Array.isArray(v) && v.length === 2 && Number.isFinite(v[0]) && Number.isFinite(v[1]) && v[1] > v[0];
}

export class App {
  /**
   * @param {AnyModel} model
   * @param {HTMLElement} host
   * @param {number} t0 performance.now() when render() was called
   */
  constructor(model, host, t0) {
    this.model = model;
    this.host = host;
    this.renderStart = t0;
    this.sync = new Sync(model);
    this.requests = new Requests(model);
    /** @type {Settings} */
    this.s = defaultSettings();
    /** @type {Set<number>} sample row ids expanded (when not expand-all) */
    this.expanded = new Set();
    /** @type {Set<number>} sample row ids collapsed (when expand-all) */
    this.collapsed = new Set();
    this.highlight = -1;
    this.view = { t0: 0, t1: 1 };
    this.cursor = NaN;
    /** @type {[number, number]|null} */
    this.brush = null;
    /** @type {import("./stats.js").BrushSummary|null} */
    this.brushSum = null;
    /** @type {Hit|null} */
    this.selection = null;
    /** @type {Hit|null} */
    this.hover = null;
    this.hoverRow = -1;
    this.pendingReq = -1;
    /** @type {number[]} */
    this.frameLog = [];
    this.frameCount = 0;
    this.firstPaintMs = -1;
    this.raf = 0;
    this.disposed = false;
    this.viewportH = MAX_VIEWPORT_H;
    this.labelW = -1;
    /** @type {number|undefined} scroll offset restored from view_state on the first frame */
    this.pendingScroll = undefined;
    /** @type {import("./stats.js").CursorCounts|null} */
    this.counts = null;

    // ---- DOM
    const root = el("div", "stw-root");
    root.tabIndex = 0;
    root.setAttribute("role", "application");
    root.setAttribute("aria-label", "trace timeline");
    this.root = root;
    this.headerEl = el("div", "stw-header");
    this.statsEl = el("div", "stw-stats");
    this.legendEl = el("div", "stw-legend");
    const body = el("div", "stw-body");
    this.mainEl = el("div", "stw-main");
    this.ovCanvas = /** @type {HTMLCanvasElement} */ (el("canvas", "stw-overview"));
    this.scrollEl = el("div", "stw-scroll");
    this.canvas = /** @type {HTMLCanvasElement} */ (el("canvas", "stw-canvas"));
    this.spacer = el("div", "stw-spacer");
    this.tooltip = el("div", "stw-tooltip");
    this.tooltip.hidden = true;
    this.sideEl = el("div", "stw-side");
    this.detailsEl = el("div", "stw-panel stw-details");
    this.brushEl = el("div", "stw-panel stw-brushpanel");
    this.footerEl = el("div", "stw-footer");
    this.footerView = el("span", "stw-footer-view");
    this.footerHint = el("span", "stw-footer-hint", "drag = pan · wheel = zoom (over labels: scroll) · click = cursor & select · shift-drag = range summary · click a label = expand · W/S zoom · A/D pan · F focus · Esc clear · / filter");
    this.footerEl.appendChild(this.footerView);
    this.footerEl.appendChild(this.footerHint);
    this.scrollEl.appendChild(this.canvas);
    this.scrollEl.appendChild(this.spacer);
    this.mainEl.appendChild(this.ovCanvas);
    this.mainEl.appendChild(this.scrollEl);
    this.mainEl.appendChild(this.tooltip);
    this.sideEl.appendChild(this.detailsEl);
    this.sideEl.appendChild(this.brushEl);
    body.appendChild(this.mainEl);
    body.appendChild(this.sideEl);
    root.appendChild(this.headerEl);
    root.appendChild(this.statsEl);
    root.appendChild(this.legendEl);
    root.appendChild(body);
    root.appendChild(this.footerEl);
    host.appendChild(root);
    this.updateSide();

    this.theme = readTheme(root);
    this.painter = new Painter(this.canvas);
    this.overview = new Overview(this.ovCanvas, {
      view: () => this.view,
      setView: (a, b) => {
        this.setView(a, b);
        this.userView();
      },
      plot: () => {
        const g = this.geo();
        return { plotX: g.plotX, plotW: g.plotW };
      },
    });
    this.controls = new Controls(this.headerEl, {
      change: (p) => this.changeSettings(p),
      fitAll: () => this.fit(false),
      fitFiltered: () => this.fit(true),
    });

    // ---- data and saved state
    /** @type {Data} */
    this.d = decodePayload(this.sync.get("payload"));
    this.restoreState(this.sync.get("view_state"));
    this.colors = new ColorTable(this.d.names, this.theme);
    this.legend = legendInfo(this.d);
    /** @type {Uint32Array} */
    this.rows = new Uint32Array(0);
    this.L = buildLayout(this.d, this.rows, () => false, this.s.laneH);
    /** @type {Uint8Array} */
    this.vis = new Uint8Array(0);
    /** @type {Uint8Array} */
    this.evVis = new Uint8Array(0);
    /** @type {Float32Array} */
    this.hist = new Float32Array(0);
    this.recomputeVis();
    this.refilter();
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
      geo: () => this.geo(),
      hit: (x, y) => this.hitAt(x, y),
      panPx: (dx) => this.panPx(dx),
      zoomAt: (x, f) => this.zoomAt(x, f),
      setCursor: (t) => this.setCursor(t),
      select: (h) => this.select(h),
      toggleRow: (r) => this.toggleRow(r),
      hover: (h, cx, cy) => this.setHover(h, cx, cy),
      brush: (r, fin) => this.setBrush(r, fin),
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
    this.stopTheme = watchTheme(() => this.reTheme());
    // Browser zoom and moving between screens change devicePixelRatio.
    this.onWinResize = () => this.requestFrame();
    window.addEventListener("resize", this.onWinResize);

    this.onPayload = () => this.replacePayload();
    this.onViewRange = () => {
      if (this.sync.writing) return;
      const v = this.sync.get("view_range");
      if (!validRange(v)) return;
      if (Math.abs(v[0] - this.view.t0) < 1e-9 && Math.abs(v[1] - this.view.t1) < 1e-9) return;
      this.setView(v[0], v[1]);
    };
    this.onSelected = () => {
      if (this.sync.writing) return;
      const sel = this.sync.get("selected");
      if (sel && typeof sel === "object") this.applySelectedFromModel(sel);
    };
    model.on("change:payload", this.onPayload);
    model.on("change:view_range", this.onViewRange);
    model.on("change:selected", this.onSelected);
    this.onHeight = () => {
      this.sizeViewport();
      this.requestFrame();
    };
    model.on("change:height", this.onHeight);

    this.installDebug();
    this.requestFrame();
  }

  // ------------------------------------------------------------ state

  /** @param {any} vs */
  restoreState(vs) {
    if (!vs || typeof vs !== "object") return;
    const s = this.s;
    if (typeof vs.filter === "string") s.filter = vs.filter;
    if (Number.isInteger(vs.attempt)) s.attempt = vs.attempt;
    if (vs.attempt_mode === "highlight" || vs.attempt_mode === "filter") s.attemptMode = vs.attempt_mode;
    if (SORT_KEYS.includes(vs.sort)) s.sort = vs.sort;
    if (typeof vs.desc === "boolean") s.desc = vs.desc;
    if (typeof vs.show_events === "boolean") s.showEvents = vs.show_events;
    if (typeof vs.show_open === "boolean") s.showOpen = vs.show_open;
    if (typeof vs.show_unmatched === "boolean") s.showUnmatched = vs.show_unmatched;
    if (Number.isFinite(vs.lane_height)) s.laneH = Math.max(LANE_MIN, Math.min(LANE_MAX, Math.round(vs.lane_height)));
    if (typeof vs.expand_all === "boolean") s.expandAll = vs.expand_all;
    if (Array.isArray(vs.expanded)) this.expanded = new Set(vs.expanded.filter(Number.isFinite));
    if (Array.isArray(vs.collapsed)) this.collapsed = new Set(vs.collapsed.filter(Number.isFinite));
    if (typeof vs.highlight === "string") this.highlight = this.d.names.indexOf(vs.highlight);
  }

  /** The `view_state` value (docs/payload.md). */
  viewState() {
    const s = this.s;
    return {
      filter: s.filter,
      attempt: s.attempt,
      attempt_mode: s.attemptMode,
      sort: s.sort,
      desc: s.desc,
      show_events: s.showEvents,
      show_open: s.showOpen,
      show_unmatched: s.showUnmatched,
      lane_height: s.laneH,
      expand_all: s.expandAll,
      expanded: [...this.expanded].sort((a, b) => a - b),
      collapsed: [...this.collapsed].sort((a, b) => a - b),
      highlight: this.highlight >= 0 ? this.d.names[this.highlight] ?? null : null,
      view: [this.view.t0, this.view.t1],
      cursor: Number.isFinite(this.cursor) ? this.cursor : null,
      scroll_top: Math.round(this.scrollEl.scrollTop),
    };
  }

  saveViewState() {
    this.sync.setLater("view_state", () => this.viewState(), 250);
  }

  /** @param {Partial<Settings>} p */
  changeSettings(p) {
    const before = { ...this.s };
    Object.assign(this.s, p);
    const s = this.s;
    if (p.expandAll !== undefined && p.expandAll !== before.expandAll) {
      this.expanded.clear();
      this.collapsed.clear();
    }
    const visChanged = s.showEvents !== before.showEvents || s.showOpen !== before.showOpen || s.showUnmatched !== before.showUnmatched || s.attempt !== before.attempt || s.attemptMode !== before.attemptMode;
    if (visChanged) this.recomputeVis();
    if (s.filter !== before.filter || s.sort !== before.sort || s.desc !== before.desc) this.refilter();
    else if (s.laneH !== before.laneH || s.expandAll !== before.expandAll) this.relayout();
    if (visChanged) this.afterVisChange();
    this.updateControls();
    this.saveViewState();
    this.requestFrame();
  }

  recomputeVis() {
    const o = { showOpen: this.s.showOpen, showEvents: this.s.showEvents, showUnmatched: this.s.showUnmatched, attempt: this.s.attempt, attemptMode: this.s.attemptMode, highlightName: this.highlight };
    this.vis = spanVisibility(this.d, o);
    this.evVis = eventVisibility(this.d, o);
  }

  afterVisChange() {
    if (Number.isFinite(this.cursor)) this.counts = cursorCounts(this.d, this.rows, this.vis, this.cursor);
    this.renderStats();
    this.recomputeBrush();
  }

  /** Filter + sort -> rows; then layout, histogram, counts. */
  refilter() {
    const d = this.d;
    this.rows = sortRows(d, filterSamples(d, this.s.filter), this.s.sort, this.s.desc);
    this.hist = activeHistogram(d, this.rows, d.globalStart, d.globalEnd, 400);
    this.overview.setData(this.hist, d.globalStart, d.globalEnd);
    this.relayout();
    if (this.hoverRow >= this.rows.length) this.hoverRow = -1;
    if (Number.isFinite(this.cursor)) this.counts = cursorCounts(d, this.rows, this.vis, this.cursor);
    this.renderStats();
    this.recomputeBrush();
  }

  /** @param {number} s payload sample */
  isExpanded(s) {
    const id = sampleRowId(this.d, s);
    return this.s.expandAll ? !this.collapsed.has(id) : this.expanded.has(id);
  }

  relayout() {
    this.L = buildLayout(this.d, this.rows, (s) => this.isExpanded(s), this.s.laneH);
    this.sizeViewport();
  }

  /** Most the rows area may take: the `height` trait (timeline px) when the kernel sets one. */
  maxViewport() {
    const h = Number(this.sync.get("height"));
    return Number.isFinite(h) && h > 0 ? Math.max(MIN_VIEWPORT_H, h - OVERVIEW_H) : MAX_VIEWPORT_H;
  }

  sizeViewport() {
    const want = Math.max(MIN_VIEWPORT_H, Math.min(this.maxViewport(), AXIS_H + this.L.totalHeight + 2));
    this.viewportH = want;
    this.scrollEl.style.height = `${want}px`;
    this.spacer.style.height = `${Math.max(0, AXIS_H + this.L.totalHeight - want)}px`;
  }

  // ------------------------------------------------------------ view

  /** Width the row labels need (longest labels measured), cached per payload. */
  labelWidth() {
    if (this.labelW >= 0) return this.labelW;
    const d = this.d;
    /** @type {string[]} */
    const labels = [];
    for (let s = 0; s < d.nSamples; s++) labels.push(sampleLabel(d, s) + (Number.isNaN(d.smpStart[s]) ? " (untraced)" : ""));
    labels.sort((a, b) => b.length - a.length);
    const font = `12px ${this.theme.font}`;
    let w = 60;
    for (const l of labels.slice(0, 40)) w = Math.max(w, this.painter.textWidth(font, l));
    this.labelW = w;
    return w;
  }

  /** @returns {Geo} */
  geo() {
    const width = Math.max(200, this.scrollEl.clientWidth || this.mainEl.clientWidth || 800);
    const gutter = Math.round(Math.max(120, Math.min(this.labelWidth() + 36, 300, width * 0.26)));
    const plotX = gutter + 8;
    return { width, height: this.viewportH, gutter, plotX, plotW: Math.max(40, width - plotX - 12), axisH: AXIS_H, scrollTop: this.scrollEl.scrollTop, t0: this.view.t0, t1: this.view.t1 };
  }

  /**
   * @param {number} a
   * @param {number} b
   */
  setView(a, b) {
    const d = this.d;
    const gspan = Math.max(d.globalEnd - d.globalStart, 1e-3);
    let span = Math.max(2e-6, Math.min(gspan * 4, b - a));
    let t0 = (a + b) / 2 - span / 2;
    if (!Number.isFinite(t0) || !Number.isFinite(span)) {
      t0 = d.globalStart;
      span = gspan;
    }
    t0 = Math.max(d.globalStart - span * 0.9, Math.min(d.globalEnd - span * 0.1, t0));
    this.view = { t0, t1: t0 + span };
    this.requestFrame();
  }

  /** A user pan/zoom ended (or happened): write view_range and view_state, debounced. */
  userView() {
    this.sync.setLater("view_range", () => [this.view.t0, this.view.t1], 200);
    this.saveViewState();
  }

  /** @param {number} dx */
  panPx(dx) {
    const g = this.geo();
    const dt = (dx * (this.view.t1 - this.view.t0)) / g.plotW;
    this.setView(this.view.t0 - dt, this.view.t1 - dt);
  }

  /**
   * @param {number} x
   * @param {number} f
   */
  zoomAt(x, f) {
    const g = this.geo();
    const t = timeAt(g, x);
    const a = t - (t - this.view.t0) * f;
    const b = t + (this.view.t1 - t) * f;
    if (b - a < 2e-6) return;
    this.setView(a, b);
    // Keep the time under the pointer in place despite clamping.
    const g2 = this.geo();
    const drift = timeAt(g2, x) - t;
    if (Math.abs(drift) > 1e-12 && Number.isFinite(drift)) this.view = { t0: this.view.t0 - drift, t1: this.view.t1 - drift };
  }

  /**
   * @param {boolean} filtered fit the filtered rows (else everything)
   * @param {boolean} [silent] do not write view_range
   */
  fit(filtered, silent = false) {
    const d = this.d;
    let lo = Infinity;
    let hi = -Infinity;
    if (filtered) {
      for (const s of this.rows) {
        if (d.smpStart[s] < lo) lo = d.smpStart[s];
        if (d.smpEnd[s] > hi) hi = d.smpEnd[s];
      }
    }
    if (!(lo < hi)) {
      lo = d.globalStart;
      hi = d.globalEnd;
    }
    const pad = (hi - lo) * 0.01;
    this.setView(lo - pad, hi + pad);
    if (!silent) this.userView();
  }

  // ------------------------------------------------------------ interaction

  /**
   * @param {number} x
   * @param {number} y
   */
  hitAt(x, y) {
    return hitTest(this.d, this.L, this.geo(), this.vis, this.evVis, x, y);
  }

  /**
   * @param {number} t
   * @param {boolean} [silent]
   */
  setCursor(t, silent = false) {
    this.cursor = t;
    this.counts = cursorCounts(this.d, this.rows, this.vis, t);
    this.renderStats();
    if (!silent) this.saveViewState();
    this.requestFrame();
  }

  /**
   * @param {[number, number]|null} r
   * @param {boolean} final
   */
  setBrush(r, final) {
    this.brush = r;
    if (final && r) {
      const g = this.geo();
      if ((Math.abs(r[1] - r[0]) * g.plotW) / (this.view.t1 - this.view.t0) < 3) this.brush = null;
    }
    if (final) this.recomputeBrush();
    this.requestFrame();
  }

  recomputeBrush() {
    if (!this.brush) {
      this.brushSum = null;
      this.brushEl.replaceChildren();
      this.updateSide();
      return;
    }
    const [a, b] = this.brush;
    this.brushSum = brushSummary(this.d, this.rows, this.vis, Math.min(a, b), Math.max(a, b));
    renderBrushPanel(
      this.brushEl,
      this.d,
      this.brushSum,
      () => this.setBrush(null, true),
      (n) => this.toggleHighlight(n),
    );
    this.updateSide();
  }

  /** @param {Hit|null} h */
  select(h) {
    this.selection = h;
    this.requestFrame();
    if (!h) {
      this.pendingReq = -1;
      this.detailsEl.replaceChildren();
      this.updateSide();
      this.sync.setNow("selected", {});
      return;
    }
    this.sync.setNow("selected", this.selectedValue(h));
    this.loadDetails(h);
  }

  /**
   * The `selected` value for a hit (docs/payload.md).
   * @param {Hit} h
   */
  selectedValue(h) {
    const d = this.d;
    if (h.type === "event") return { kind: "event", index: evToPayload(d, h.ev), sample_row: sampleRowId(d, h.sample), name: nameOf(d, d.evName[h.ev]) };
    if (h.type === "span" || h.type === "segment") {
      const i = h.type === "segment" ? detailSpanForSegment(d, h.seg) : h.span;
      return { kind: "span", index: spanToPayload(d, i), sample_row: sampleRowId(d, h.sample), name: nameOf(d, d.spanName[i]) };
    }
    return {};
  }

  /** @param {Hit} h */
  loadDetails(h) {
    const d = this.d;
    if (h.type !== "span" && h.type !== "segment" && h.type !== "event") return;
    const detailSpan = h.type === "segment" ? detailSpanForSegment(d, h.seg) : h.type === "span" ? h.span : -1;
    const kind = h.type === "event" ? "event" : "span";
    const index = h.type === "event" ? evToPayload(d, h.ev) : spanToPayload(d, detailSpan);
    const actions = {
      close: () => this.select(null),
      focus: () => this.focusSelection(),
      selectSpan: (/** @type {number} */ i) => {
        const s = d.spanSample[i];
        const row = this.L.rowOfSample[s];
        if (row < 0) return;
        this.select({ type: "span", row, sample: s, span: i, t: d.spanStart[i] });
      },
      sampleText: (/** @type {string} */ field) => this.requests.sampleText(h.sample, field).promise,
    };
    renderDetails(this.detailsEl, d, h, detailSpan, { status: "loading", detail: null }, actions);
    this.updateSide();
    const { req, promise } = this.requests.attrs(kind, index);
    this.pendingReq = req;
    promise.then(
      (reply) => {
        if (this.disposed || reply.req !== this.pendingReq || this.selection !== h) return; // stale
        const ok = reply.detail && typeof reply.detail === "object";
        renderDetails(this.detailsEl, d, h, detailSpan, ok ? { status: "ok", detail: /** @type {Record<string, any>} */ (reply.detail) } : { status: "error", detail: null, error: reply.error || "no attributes" }, actions);
      },
      (err) => {
        if (this.disposed || req !== this.pendingReq || this.selection !== h) return;
        renderDetails(this.detailsEl, d, h, detailSpan, { status: "error", detail: null, error: String(err && err.message ? err.message : err) }, actions);
      },
    );
  }

  /** @param {any} sel `selected` from the kernel */
  applySelectedFromModel(sel) {
    const d = this.d;
    if (!sel || !("kind" in sel)) {
      if (this.selection) {
        this.selection = null;
        this.pendingReq = -1;
        this.detailsEl.replaceChildren();
        this.updateSide();
        this.requestFrame();
      }
      return;
    }
    // The kernel echoes our own selection back completed (span_id, frame
    // index): nothing to do when it names what is already selected.
    if (this.selection) {
      const cur = /** @type {any} */ (this.selectedValue(this.selection));
      if (cur.kind === sel.kind && cur.index === Number(sel.index)) return;
    }
    if (sel.kind === "span") {
      const i = spanFromPayload(d, Number(sel.index));
      if (!(i >= 0 && i < d.nSpans)) return;
      const s = d.spanSample[i];
      const row = this.L.rowOfSample[s] ?? -1;
      this.selection = { type: "span", row, sample: s, span: i, t: d.spanStart[i] };
    } else if (sel.kind === "event") {
      const i = evFromPayload(d, Number(sel.index));
      if (!(i >= 0 && i < d.nEvents)) return;
      const s = d.evSample[i];
      const row = this.L.rowOfSample[s] ?? -1;
      this.selection = { type: "event", row, sample: s, ev: i, count: 1, members: [i], t: d.evTs[i] };
    } else return;
    this.loadDetails(this.selection);
    this.requestFrame();
  }

  focusSelection() {
    const d = this.d;
    const h = this.selection;
    let a = NaN;
    let b = NaN;
    if (h && h.type === "span") {
      a = d.spanStart[h.span];
      b = Math.max(d.spanEnd[h.span], a);
    } else if (h && h.type === "segment") {
      a = d.segStart[h.seg];
      b = d.segEnd[h.seg];
    } else if (h && h.type === "event") {
      const span = Math.min(this.view.t1 - this.view.t0, 2);
      a = d.evTs[h.ev] - span / 2;
      b = d.evTs[h.ev] + span / 2;
    } else if (Number.isFinite(this.cursor)) {
      const span = this.view.t1 - this.view.t0;
      a = this.cursor - span / 2;
      b = this.cursor + span / 2;
    }
    if (!Number.isFinite(a)) return;
    const w = Math.max(b - a, 1e-3);
    const pad = h && h.type !== "event" ? w * 0.15 : 0;
    this.setView(a - pad, a + w + pad);
    if (h && "sample" in h) this.scrollRowIntoView(this.L.rowOfSample[h.sample]);
    this.userView();
  }

  /** @param {number} r */
  scrollRowIntoView(r) {
    if (r < 0) return;
    const top = this.L.rowTop[r];
    const bottom = this.L.rowTop[r + 1];
    const vh = this.viewportH - AXIS_H;
    const st = this.scrollEl.scrollTop;
    if (top < st) this.scrollEl.scrollTop = top;
    else if (bottom > st + vh) this.scrollEl.scrollTop = Math.min(top, bottom - vh);
  }

  escape() {
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

  /** @param {number} r */
  toggleRow(r) {
    const s = this.rows[r];
    if (s === undefined || this.d.nLanes[s] <= 1) return;
    const id = sampleRowId(this.d, s);
    const set = this.s.expandAll ? this.collapsed : this.expanded;
    if (set.has(id)) set.delete(id);
    else set.add(id);
    // Keep the clicked row where it is on screen.
    const offset = this.L.rowTop[r] - this.scrollEl.scrollTop;
    this.relayout();
    this.scrollEl.scrollTop = Math.max(0, this.L.rowTop[r] - offset);
    this.saveViewState();
    this.requestFrame();
  }

  /** @param {number} n */
  toggleHighlight(n) {
    this.highlight = this.highlight === n ? -1 : n;
    this.recomputeVis();
    this.afterVisChange();
    this.renderLegend();
    this.saveViewState();
    this.requestFrame();
  }

  /**
   * @param {Hit|null} h
   * @param {number} clientX
   * @param {number} clientY
   */
  setHover(h, clientX, clientY) {
    const item = h && (h.type === "span" || h.type === "segment" || h.type === "event") ? h : null;
    const row = h && "row" in h ? h.row : -1;
    const same = sameHit(item, this.hover) && row === this.hoverRow;
    this.hover = item;
    this.hoverRow = row;
    if (!same) this.requestFrame();
    if (!h || (h.type !== "label" && !item)) {
      this.tooltip.hidden = true;
      this.canvas.style.cursor = "";
      return;
    }
    this.canvas.style.cursor = h.type === "label" ? "pointer" : "";
    if (!same) this.fillTooltip(h);
    const mr = this.mainEl.getBoundingClientRect();
    this.tooltip.hidden = false;
    const tw = this.tooltip.offsetWidth;
    const th = this.tooltip.offsetHeight;
    let x = clientX - mr.left + 14;
    let y = clientY - mr.top + 16;
    if (x + tw > mr.width - 4) x = Math.max(4, clientX - mr.left - tw - 14);
    if (y + th > mr.height - 4) y = Math.max(4, clientY - mr.top - th - 12);
    this.tooltip.style.transform = `translate(${Math.round(x)}px, ${Math.round(y)}px)`;
  }

  /** @param {Hit} h */
  fillTooltip(h) {
    const d = this.d;
    const tt = this.tooltip;
    tt.replaceChildren();
    /** @param {string} k @param {string} v */
    const line = (k, v) => {
      const row = el("div", "stw-tt-row");
      row.appendChild(el("span", "stw-tt-k", k));
      row.appendChild(el("span", "stw-tt-v", v));
      tt.appendChild(row);
    };
    const s = "sample" in h ? h.sample : -1;
    const sampleLine = () => {
      const si = d.meta.samples.sample_index[s];
      line("sample", si === null || si === undefined ? `row ${sampleRowId(d, s)}` : String(si));
      line("source", sourceOf(d, s) || "—");
    };
    if (h.type === "label") {
      tt.appendChild(el("div", "stw-tt-title", sampleLabel(d, s)));
      line("status", statusOf(d, s) || "—");
      line("reward", Number.isFinite(d.smpReward[s]) ? formatNumber(d.smpReward[s]) : "—");
      line("duration", formatDuration(d.smpEnd[s] - d.smpStart[s]));
      line("lanes", String(d.nLanes[s]));
      if (d.smpOpen[s]) line("open spans", String(d.smpOpen[s]));
      const lab = d.meta.samples.label[s];
      if (lab) line("label", lab.length > 120 ? lab.slice(0, 120) + "…" : lab);
      if (d.nLanes[s] > 1) tt.appendChild(el("div", "stw-tt-hint", "click to expand / collapse"));
      return;
    }
    if (h.type === "span") {
      const i = h.span;
      const fl = d.spanFlags[i];
      tt.appendChild(el("div", "stw-tt-title", nameOf(d, d.spanName[i])));
      sampleLine();
      line("attempt", String(d.spanAttempt[i]));
      const p = d.spanParent[i];
      line("parent", p >= 0 ? nameOf(d, d.spanName[p]) : "—");
      line("start", formatDuration(d.spanStart[i]));
      line(fl & F_OPEN ? "display end" : "end", formatDuration(d.spanEnd[i]));
      line("duration", formatDuration(d.spanEnd[i] - d.spanStart[i]));
      if (fl & F_OPEN) line("state", `open (clipped at ${CLIP_REASONS[clipReasonOf(fl)] || "display end"})`);
      if (fl & F_ERROR) line("error", "yes");
      if (fl & F_VIRTUAL) line("PD", "virtual lane");
      return;
    }
    if (h.type === "segment") {
      const g = h.seg;
      const v = h.span;
      tt.appendChild(el("div", "stw-tt-title", `${nameOf(d, d.spanName[v])} ${nameOf(d, d.segName[g])}`));
      sampleLine();
      line("attempt", String(d.spanAttempt[v]));
      const p = d.spanParent[v];
      line("parent", p >= 0 ? nameOf(d, d.spanName[p]) : "—");
      line("start", formatDuration(d.segStart[g]));
      line("end", formatDuration(d.segEnd[g]));
      const dur = d.segEnd[g] - d.segStart[g];
      const vd = d.spanEnd[v] - d.spanStart[v];
      line("duration", `${formatDuration(dur)}${vd > 0 ? ` (${((dur / vd) * 100).toFixed(1)}% of ${nameOf(d, d.spanName[v])})` : ""}`);
      return;
    }
    if (h.type === "event") {
      const e = h.ev;
      const unmatched = d.evKind[e] === EV_UNMATCHED;
      if (h.count > 1) {
        const counts = new Map();
        for (const m of h.members) counts.set(nameOf(d, d.evName[m]), (counts.get(nameOf(d, d.evName[m])) || 0) + 1);
        tt.appendChild(el("div", "stw-tt-title", `${h.count} ${unmatched ? "unmatched ends" : "events"}`));
        for (const [n, c] of [...counts].slice(0, 8)) line(n, `×${c}`);
        const ts = h.members.map((m) => d.evTs[m]);
        sampleLine();
        line("from", formatDuration(Math.min(...ts)));
        line("to", formatDuration(Math.max(...ts)));
        tt.appendChild(el("div", "stw-tt-hint", "zoom in to separate them"));
        return;
      }
      tt.appendChild(el("div", "stw-tt-title", unmatched ? `unmatched end: ${nameOf(d, d.evName[e])}` : nameOf(d, d.evName[e])));
      sampleLine();
      line("attempt", String(d.evAttempt[e]));
      const p = d.evParent[e];
      line("parent", p >= 0 ? nameOf(d, d.spanName[p]) : "—");
      line("time", formatDuration(d.evTs[e]));
      if (unmatched) tt.appendChild(el("div", "stw-tt-hint", "an end record whose start is missing"));
    }
  }

  // ------------------------------------------------------------ payload

  replacePayload() {
    const oldView = this.view;
    const hadSel = !!this.selection;
    this.d = decodePayload(this.sync.get("payload"));
    this.labelW = -1;
    this.colors = new ColorTable(this.d.names, this.theme);
    this.legend = legendInfo(this.d);
    if (this.highlight >= this.d.names.length) this.highlight = -1;
    this.selection = null;
    this.hover = null;
    this.hoverRow = -1;
    this.pendingReq = -1;
    this.detailsEl.replaceChildren();
    this.recomputeVis();
    this.refilter();
    const d = this.d;
    // Keep the zoom when it still shows some of the new data.
    if (oldView.t1 > d.globalStart && oldView.t0 < d.globalEnd) this.setView(oldView.t0, oldView.t1);
    else this.fit(false, true);
    if (Number.isFinite(this.cursor)) this.counts = cursorCounts(d, this.rows, this.vis, this.cursor);
    this.renderLegend();
    this.renderStats();
    this.updateControls();
    this.updateSide();
    if (hadSel) this.sync.setNow("selected", {});
    this.requestFrame();
  }

  // ------------------------------------------------------------ DOM bits

  renderLegend() {
    renderLegend(this.legendEl, this.d, this.legend, this.highlight, (n) => this.toggleHighlight(n));
  }

  renderStats() {
    renderStatsBar(this.statsEl, this.d, this.counts, this.rows.length, (n) => this.toggleHighlight(n));
  }

  updateControls() {
    const d = this.d;
    this.controls.update(this.s, {
      title: d.meta.title,
      nRows: this.rows.length,
      nTotal: d.meta.n_samples_total,
      nPayload: d.nSamples,
      maxAttempt: d.maxAttempt,
    });
  }

  updateSide() {
    const any = this.detailsEl.childElementCount > 0 || this.brushEl.childElementCount > 0;
    this.sideEl.hidden = !any;
    this.detailsEl.hidden = this.detailsEl.childElementCount === 0;
    this.brushEl.hidden = this.brushEl.childElementCount === 0;
    this.root.classList.toggle("stw-has-side", any);
  }

  reTheme() {
    this.theme = readTheme(this.root);
    this.colors = new ColorTable(this.d.names, this.theme);
    this.painter.resetTextCache();
    this.labelW = -1;
    this.requestFrame();
  }

  // ------------------------------------------------------------ frames

  requestFrame() {
    if (this.raf || this.disposed) return;
    this.raf = requestAnimationFrame(() => this.frame());
  }

  frame() {
    this.raf = 0;
    if (this.disposed) return;
    const t = performance.now();
    const width = this.root.clientWidth;
    this.root.classList.toggle("stw-narrow", width > 0 && width < 980);
    if (this.pendingScroll !== undefined) {
      this.scrollEl.scrollTop = this.pendingScroll;
      this.pendingScroll = undefined;
    }
    const g = this.geo();
    const dpr = Math.max(1, window.devicePixelRatio || 1);
    if (this.painter.w !== g.width || this.painter.h !== g.height || this.painter.dpr !== dpr) this.painter.resize(g.width, g.height, dpr);
    if (this.overview.w !== g.width || this.overview.dpr !== dpr) this.overview.resize(g.width, OVERVIEW_H, dpr);
    const selRow = this.selection && "row" in this.selection ? this.L.rowOfSample[this.selection.sample] ?? -1 : -1;
    const drawn = this.painter.paint({
      d: this.d,
      L: this.L,
      g,
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
      raiseShown: this.highlight >= 0,
    });
    if (this.rows.length === 0) this.paintEmpty(g);
    this.overview.paint(this.theme, this.cursor);
    const dt = performance.now() - t;
    if (!this.sideEl.hidden) {
      const mh = this.root.classList.contains("stw-narrow") ? "" : `${this.mainEl.offsetHeight}px`;
      if (this.sideEl.style.maxHeight !== mh) this.sideEl.style.maxHeight = mh;
    }
    this.frameLog.push(dt);
    this.frameCount++;
    if (this.frameLog.length > FRAME_LOG) this.frameLog.splice(0, this.frameLog.length - FRAME_LOG);
    this.root.dataset.rows = String(this.rows.length);
    this.root.dataset.drawnRows = String(drawn);
    this.updateFooter();
    if (this.firstPaintMs < 0) {
      this.firstPaintMs = performance.now() - this.renderStart;
      this.root.dataset.ready = "1";
    }
  }

  /** @param {Geo} g */
  paintEmpty(g) {
    const ctx = this.painter.ctx;
    ctx.fillStyle = this.theme.fg2;
    ctx.font = `13px ${this.theme.font}`;
    ctx.textBaseline = "middle";
    const msg = this.d.nSamples === 0 ? "no samples in this payload" : "no samples match the filter";
    ctx.fillText(msg, g.plotX + 12, g.axisH + 30);
  }

  updateFooter() {
    const d = this.d;
    const txt = `view ${formatDuration(this.view.t0)} – ${formatDuration(this.view.t1)} (${formatDuration(this.view.t1 - this.view.t0)}) · dump ${formatDuration(d.globalEnd - d.globalStart)} · ${formatNumber(d.nSpans)} spans · ${formatNumber(d.nEvents)} events`;
    if (this.footerView.textContent !== txt) this.footerView.textContent = txt;
  }

  // ------------------------------------------------------------ testing hooks

  installDebug() {
    const self = this;
    /** @param {{x: number, y: number, w: number, h: number}|null} b */
    const toClient = (b) => {
      if (!b) return null;
      const g = self.geo();
      const x0 = Math.max(b.x, g.plotX);
      const x1 = Math.min(b.x + b.w, g.plotX + g.plotW);
      const y0 = Math.max(b.y, g.axisH);
      const y1 = Math.min(b.y + b.h, g.height);
      if (x1 - x0 <= 0 || y1 - y0 <= 0) return null;
      const r = self.canvas.getBoundingClientRect();
      return { x: r.left + x0, y: r.top + y0, w: x1 - x0, h: y1 - y0 };
    };
    /** @type {any} */ (this.root).stwDebug = {
      /** @param {number} index payload span index */
      spanRect(index) {
        return toClient(spanBox(self.d, self.L, self.geo(), spanFromPayload(self.d, index)));
      },
      /** @param {number} index payload event index */
      eventRect(index) {
        return toClient(eventBox(self.d, self.L, self.geo(), evFromPayload(self.d, index)));
      },
      /** @param {number} sampleIndex payload sample index */
      rowOfSample(sampleIndex) {
        return self.L.rowOfSample[sampleIndex] ?? -1;
      },
      frameTimes() {
        return self.frameLog.slice();
      },
      get firstPaintMs() {
        return self.firstPaintMs;
      },
      /** Frames painted since render (frameTimes keeps the last 600). */
      get frameCount() {
        return self.frameCount;
      },
      state() {
        return {
          viewStart: self.view.t0,
          viewEnd: self.view.t1,
          sort: self.s.sort,
          desc: self.s.desc,
          filter: self.s.filter,
          attempt: self.s.attempt,
          attemptMode: self.s.attemptMode,
          showEvents: self.s.showEvents,
          showOpen: self.s.showOpen,
          showUnmatched: self.s.showUnmatched,
          laneHeight: self.s.laneH,
          expandAll: self.s.expandAll,
          expanded: [...self.expanded],
          collapsed: [...self.collapsed],
          highlight: self.highlight >= 0 ? nameOf(self.d, self.highlight) : null,
          cursor: Number.isFinite(self.cursor) ? self.cursor : null,
          brush: self.brush ? [...self.brush] : null,
          selected: self.selection ? self.selectedValue(self.selection) : null,
          rows: self.rows.length,
          scrollTop: self.scrollEl.scrollTop,
          counts: self.counts ? { notStarted: self.counts.notStarted, running: self.counts.running, ended: self.counts.ended } : null,
        };
      },
      /**
       * @param {number} a
       * @param {number} b
       */
      setView(a, b) {
        self.setView(a, b);
        self.userView();
      },
      /** @param {number} i */
      scrollToRow(i) {
        const r = Math.max(0, Math.min(self.rows.length - 1, i));
        self.scrollEl.scrollTop = self.L.rowTop[r] ?? 0;
        self.requestFrame();
      },
      /**
       * What is at a client point (for tests).
       * @param {number} clientX
       * @param {number} clientY
       */
      hitAt(clientX, clientY) {
        const r = self.canvas.getBoundingClientRect();
        return self.hitAt(clientX - r.left, clientY - r.top);
      },
      selectionRect() {
        return toClient(hitBox(self.d, self.L, self.geo(), self.selection));
      },
    };
  }

  dispose() {
    this.disposed = true;
    cancelAnimationFrame(this.raf);
    this.sync.flush();
    this.interaction.dispose();
    this.overview.dispose();
    this.controls.dispose();
    this.requests.dispose();
    this.ro?.disconnect();
    this.stopTheme();
    this.scrollEl.removeEventListener("scroll", this.onScroll);
    window.removeEventListener("resize", this.onWinResize);
    this.model.off("change:payload", this.onPayload);
    this.model.off("change:view_range", this.onViewRange);
    this.model.off("change:selected", this.onSelected);
    this.model.off("change:height", this.onHeight);
    this.root.remove();
  }
}

/**
 * @param {Hit|null} a
 * @param {Hit|null} b
 */
function sameHit(a, b) {
  if (a === b) return true;
  if (!a || !b || a.type !== b.type) return false;
  if (a.type === "span" && b.type === "span") return a.span === b.span;
  if (a.type === "segment" && b.type === "segment") return a.seg === b.seg;
  if (a.type === "event" && b.type === "event") return a.ev === b.ev && a.count === b.count;
  return false;
}
