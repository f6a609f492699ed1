// The critical path view (the path itself is data/critical.js): CriticalView
// wires the answer to the toolbar toggle, the focus mask and the side panel.

import { criticalPath, listedSteps, MAX_LISTED, sampleLatency, stepName, stepStart } from "../data/critical.js";
import { formatDuration } from "../util/format.js";
import { el } from "../util/dom.js";

/** @typedef {import("../data/critical.js").CriticalStep} CriticalStep */
/** @typedef {import("../ui/app.js").App} App */

/**
 * The "critical path" toggle: while on, the selected item's sample's path is
 * the timeline's focus (everything else dims) and the side panel lists it.
 */
export class CriticalView {
  /** @param {App} app */
  constructor(app) {
    this.app = app;
    this.panel = app.ui.criticalEl;
    /** @type {Uint8Array|null} the focus mask this view set (null: none) */
    this.focus = null;
    /** @type {CriticalStep[]} */
    this.path = [];
    this.sample = -1;
  }

  /** Recompute for the current selection and toggle (on every change of either, and of the payload). */
  update() {
    const app = this.app;
    const hit = app.pointer.selection;
    const sample = app.viewState.settings.critical && hit && "sample" in hit ? hit.sample : -1;
    if (sample < 0) {
      this.sample = -1;
      this.path = [];
      if (this.focus && app.shown.masks.focus === this.focus) app.setMasks({ focus: null, evFocus: null });
      this.focus = null;
      this.render();
      return;
    }
    const data = app.shown.data;
    this.sample = sample;
    this.path = criticalPath(data, sample);
    const focus = new Uint8Array(data.nSpans);
    for (const step of this.path) focus[step.span] = 1;
    this.focus = focus;
    app.setMasks({ focus, evFocus: new Uint8Array(data.nEvents) });
    this.render();
  }

  render() {
    const app = this.app;
    const data = app.shown.data;
    this.panel.replaceChildren();
    if (this.sample >= 0) {
      const total = sampleLatency(data, this.sample);
      const head = el("div", "stw-panel-title", `critical path · ${this.path.length} steps · latency ${formatDuration(total)}`);
      this.panel.appendChild(head);
      const list = el("div", "stw-critical-list");
      const shown = listedSteps(this.path, MAX_LISTED);
      for (const step of shown) {
        const row = el("div", "stw-critical-row");
        const share = total > 0 ? `${((100 * step.critical) / total).toFixed(1)}%` : "";
        row.appendChild(el("span", "stw-critical-name", stepName(data, step)));
        row.appendChild(el("span", "stw-critical-secs", formatDuration(step.critical)));
        row.appendChild(el("span", "stw-critical-share", share));
        const start = stepStart(data, step);
        row.title = `starts at ${formatDuration(start)}; click to select`;
        row.dataset.span = String(step.span);
        if (step.seg >= 0) row.dataset.seg = String(step.seg);
        row.addEventListener("click", () => {
          const rowIndex = app.shown.layout.rowOfSample[this.sample] ?? -1;
          const sample = this.sample;
          app.select(step.seg >= 0 ? { type: "segment", row: rowIndex, sample, span: step.span, seg: step.seg, t: start } : { type: "span", row: rowIndex, sample, span: step.span, t: start });
        });
        list.appendChild(row);
      }
      this.panel.appendChild(list);
      if (shown.length < this.path.length) this.panel.appendChild(el("div", "stw-critical-more", `${this.path.length - shown.length} shorter steps not listed (all are bright in the timeline)`));
    }
    app.updateSide();
  }
}
