// A live rollout in a view (docs/live-view.md): a payload whose `meta.live` is
// set starts empty and is filled by `live_delta` messages (the kernel's, or the
// served page's poller's), each applied to the columns kept here (splice.js)
// and drawn in place, the selection kept. Between deltas the clock runs on: four
// times a second the open spans grow to "now", the now line moves, stalled
// samples and stragglers are found again (status.js) and the banner says what
// is running and what was lost. A payload without `meta.live` ends it (the
// hand-over to the dump).

import { emptyLiveState, spliceLive, livePayload, applicable, baseFor } from "./splice.js";
import { liveStatus, growingSpans, growTo } from "./status.js";
import { keepHit } from "./keep.js";
import { paintLiveMarks } from "./marks.js";
import { renderBanner } from "./banner.js";
import { el } from "../util/dom.js";

/** @typedef {import("../ui/app.js").App} App */

const TICK_MS = 250;

/**
 * Start following a live rollout when the app's payload is a live one.
 * @param {App} app
 * @returns {LiveView|null}
 */
export function attachLive(app) {
  const live = app.sync.get("payload")?.meta?.live;
  return live && typeof live === "object" ? new LiveView(app, live) : null;
}

/**
 * A delta's columns: named binary buffers of a widget message, or base64 texts
 * in its `buffers` (the served page's JSON).
 * @param {any} msg
 * @param {any[]} [buffers]
 * @returns {Record<string, unknown>}
 */
export function deltaBuffers(msg, buffers) {
  if (msg.buffers && typeof msg.buffers === "object" && !Array.isArray(msg.buffers)) return msg.buffers;
  /** @type {Record<string, unknown>} */
  const out = {};
  const names = Array.isArray(msg.buffer_names) ? msg.buffer_names : [];
  names.forEach((/** @type {string} */ name, /** @type {number} */ i) => {
    if (buffers && buffers[i] !== undefined) out[name] = buffers[i];
  });
  return out;
}

export class LiveView {
  /**
   * @param {App} app
   * @param {Record<string, any>} options the live payload's `meta.live`
   */
  constructor(app, options) {
    this.app = app;
    this.state = emptyLiveState();
    this.state.live = options;
    this.stallAfter = Number.isFinite(options.stall_after) ? options.stall_after : 60;
    this.receivedAt = performance.now();
    /** @type {Uint32Array} */
    this.growing = new Uint32Array(0);
    /** @type {import("./status.js").LiveStatus|null} */
    this.status = null;
    /** @type {{x: number, tags: {sample: number, text: string, y: number}[]}|null} the marks of the last frame */
    this.marks = null;
    this.following = options.following !== false;
    this.disposed = false;
    this.asked = -1;
    this.lastSort = 0;
    this.banner = el("div", "stw-banner stw-live-banner");
    app.ui.root.insertBefore(this.banner, app.ui.root.firstChild);
    /** @param {any} msg @param {any[]} [buffers] */
    this.onMsg = (msg, buffers) => {
      if (msg && msg.type === "live_delta") this.receive(msg, buffers);
    };
    this.onPayload = () => {
      if (!app.sync.get("payload")?.meta?.live) this.dispose(); // handed over to a dump
    };
    app.model.on("msg:custom", this.onMsg);
    app.model.on("change:payload", this.onPayload);
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.ask(0);
    renderBanner(this.banner, { nSamples: 0, status: null, live: options, following: this.following });
  }

  /** @param {number} since ask for every block changed after `since` (of this view's epoch) */
  ask(since) {
    if (this.asked === since) return;
    this.asked = since;
    this.app.model.send({ type: "live_sync", since, epoch: this.state.epoch || null });
  }

  /**
   * Apply a delta (or ask for what it is missing).
   * @param {any} msg
   * @param {any[]} [buffers]
   */
  receive(msg, buffers) {
    if (this.disposed) return;
    if (!applicable(this.state, msg)) {
      this.ask(this.state.seq);
      return;
    }
    const moved = Array.isArray(msg.positions) && msg.positions.length > 0;
    const base = baseFor(this.state, msg);
    const restarted = base !== this.state;
    this.state = spliceLive(base, msg, deltaBuffers(msg, buffers));
    this.asked = -1;
    this.receivedAt = performance.now();
    this.following = this.state.live.following !== false;
    this.stallAfter = Number.isFinite(this.state.live.stall_after) ? this.state.live.stall_after : this.stallAfter;
    if (moved || restarted || this.app.shown.data.nSamples !== this.state.nSamples) {
      const atEnd = this.app.viewState.timeWindow.t1 >= this.app.shown.data.globalEnd - 1e-6;
      this.app.replacePayload(livePayload(this.state), keepHit);
      this.growing = growingSpans(this.app.shown.data);
      if (atEnd) this.keepNowInView(true);
    }
    this.tick(true);
  }

  /** Seconds now, relative to t0: the last delta's now plus the time since (frozen once stopped). */
  now() {
    return this.state.now + (this.following ? (performance.now() - this.receivedAt) / 1000 : 0);
  }

  /**
   * Let the clock run: grow open spans, find stalls and stragglers, repaint.
   * @param {boolean} [full] also the banner and the running-time sort (else at most once a second)
   */
  tick(full = false) {
    if (this.disposed) return;
    const app = this.app;
    const now = this.now();
    const data = app.shown.data;
    const atEnd = app.viewState.timeWindow.t1 >= data.globalEnd - 1e-6;
    if (this.following) growTo(data, this.growing, now);
    this.status = liveStatus(data, now, this.stallAfter);
    data.liveRunning = this.status.runningFor;
    if (atEnd) this.keepNowInView(false);
    const second = performance.now() - this.lastSort > 1000;
    if (full || second) {
      this.lastSort = performance.now();
      if (app.viewState.settings.sort === "running") app.refilter();
      renderBanner(this.banner, { nSamples: this.state.nSamples, status: this.status, live: this.state.live, following: this.following });
    }
    app.requestFrame();
  }

  /**
   * Keep the window's right edge at the now line while the user has not moved away from it.
   * @param {boolean} fitAll when the window is the whole rollout, keep it whole
   */
  keepNowInView(fitAll) {
    const app = this.app;
    const { t0, t1 } = app.viewState.timeWindow;
    const { globalStart, globalEnd: end } = app.shown.data;
    if (fitAll || t0 <= globalStart + 1e-6) app.setView(Math.min(t0, globalStart), end);
    else app.setView(end - (t1 - t0), end);
  }

  /** @param {import("../render/hit.js").Geo} geometry */
  paint(geometry) {
    if (this.disposed || !this.status) return;
    const app = this.app;
    const { painter, theme } = app.drawing;
    this.marks = paintLiveMarks(painter.ctx, painter.dpr, geometry, app.shown.layout, app.shown.data, theme, this.status);
  }

  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    clearInterval(this.timer);
    this.app.model.off("msg:custom", this.onMsg);
    this.app.model.off("change:payload", this.onPayload);
    this.banner.remove();
  }
}
