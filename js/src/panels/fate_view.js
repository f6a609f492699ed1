// Samples' fates in the timeline, wired to the App: the ledger bars above the
// rows (ledger_bar.js) and their tooltips, the fills of rows coloured by fate
// (render/fate_rows.js) when the "Colour" control says so, the counts of the
// fate legend group and the 90%-finished markers' tooltips (render/finish_marker.js).

import { FATES, fateCounts } from "../data/fates.js";
import { fateFills } from "../render/fate_rows.js";
import { markerAt } from "../render/finish_marker.js";
import { renderLedgerBars, fillLedgerTooltip, fitLedgerLabels } from "./ledger_bar.js";
import { placeTooltip } from "../ui/tooltip.js";

/** @typedef {import("../ui/app.js").App} App */

export class FateView {
  /**
   * @param {App} app
   * @param {HTMLElement} host the ledger bars' container (above the overview strip)
   */
  constructor(app, host) {
    this.app = app;
    this.host = host;
    /** @type {import("../data/decode.js").Data|null} the payload the bars were built from */
    this.data = null;
    /** @type {number[]} samples per fate among the rows shown (FATES order, then none) */
    this.counts = [];
    this.plotX = -1;
    this.plotW = -1;
    this.plotRight = -1;
    /** @param {MouseEvent} event */
    this.onBarMove = (event) => {
      const target = event.target instanceof Element ? event.target.closest(".stw-ledger-seg") : null;
      const entry = target instanceof HTMLElement ? this.entryOf(target) : null;
      if (!entry || !(target instanceof HTMLElement)) {
        app.ui.tooltip.hidden = true;
        return;
      }
      fillLedgerTooltip(app.ui.tooltip, app.shown.data, entry, FATES.indexOf(target.dataset.fate ?? ""));
      placeTooltip(app.ui.tooltip, app.ui.mainEl, event.clientX, event.clientY);
    };
    this.onBarLeave = () => {
      app.ui.tooltip.hidden = true;
    };
    /** @param {MouseEvent} event */
    this.onCanvasMove = (event) => {
      const rect = app.ui.canvas.getBoundingClientRect();
      const geometry = app.geometry();
      const item = markerAt(app.drawing.painter.finishPlaced, event.clientX - rect.left, event.clientY - rect.top, geometry.axisH - geometry.tracksH);
      const title = item ? item.text : "";
      if (app.ui.canvas.title !== title) app.ui.canvas.title = title;
    };
    host.addEventListener("mousemove", this.onBarMove);
    host.addEventListener("mouseleave", this.onBarLeave);
    app.ui.canvas.addEventListener("mousemove", this.onCanvasMove);
    this.changed();
  }

  /** Whether rows are coloured by fate now (the setting, and fates in the payload). */
  get on() {
    return this.app.viewState.settings.colorBy === "fate" && this.app.shown.data.hasFates;
  }

  /**
   * The ledger entry of a segment element.
   * @param {HTMLElement} segment
   */
  entryOf(segment) {
    const rollout = Number(segment.dataset.rollout);
    return this.app.shown.data.meta.ledger.entries.find((entry) => entry.rollout === rollout) ?? null;
  }

  /** The payload or the rows changed: rebuild the bars for a new payload, recount the fates. */
  changed() {
    const app = this.app;
    if (this.data !== app.shown.data) {
      this.data = app.shown.data;
      renderLedgerBars(this.host, app.shown.data);
      this.plotX = -1;
    }
    const counts = fateCounts(app.shown.data.smpFate, app.shown.rows);
    const same = counts.length === this.counts.length && counts.every((count, k) => count === this.counts[k]);
    this.counts = counts;
    if (!same && this.on) app.renderLegend();
  }

  /** The colouring changed: the legend and the rows follow. */
  update() {
    this.app.renderLegend();
    this.app.requestFrame();
  }

  /**
   * The fate legend group's counts (samples per fate among the rows shown), null while rows are coloured by span.
   * @returns {number[]|null}
   */
  legendCounts() {
    return this.on ? this.counts.slice(0, FATES.length) : null;
  }

  /**
   * Per frame: line the bars up with the plot, and the rows' fills (null: coloured by span).
   * @param {import("../render/hit.js").Geo} geometry
   */
  frame(geometry) {
    // The bars span the main area; the canvas leaves out the rows' scrollbar.
    const right = (this.host.hidden ? geometry.width : this.app.ui.mainEl.clientWidth || geometry.width) - geometry.plotX - geometry.plotW;
    if (geometry.plotX !== this.plotX || geometry.plotW !== this.plotW || right !== this.plotRight) {
      this.plotX = geometry.plotX;
      this.plotW = geometry.plotW;
      this.plotRight = right;
      this.host.style.setProperty("--stw-ledger-left", `${geometry.plotX}px`);
      this.host.style.setProperty("--stw-ledger-right", `${Math.max(0, right)}px`);
      if (!this.host.hidden) fitLedgerLabels(this.host);
    }
    return this.on ? fateFills(this.app.drawing.theme) : null;
  }

  dispose() {
    this.host.removeEventListener("mousemove", this.onBarMove);
    this.host.removeEventListener("mouseleave", this.onBarLeave);
    this.app.ui.canvas.removeEventListener("mousemove", this.onCanvasMove);
  }
}
