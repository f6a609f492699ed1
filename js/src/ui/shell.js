// The widget's DOM skeleton: header, stats bar, legend, the timeline (overview
// strip, scrolled canvas, tooltip), the side panels and the footer. App fills it.

import { el } from "../util/dom.js";
import { formatDuration, formatNumber } from "../util/format.js";

const HINT = "drag = pan · wheel = zoom (over labels: scroll) · click = cursor & select · shift-drag = range summary · click a label = expand · W/S zoom · A/D pan · F focus · Esc clear · / filter";

/**
 * @typedef {Object} Shell
 * @property {HTMLElement} root
 * @property {HTMLElement} headerEl
 * @property {HTMLElement} statsEl
 * @property {HTMLElement} legendEl
 * @property {HTMLElement} mainEl
 * @property {HTMLElement} ledgerEl the rollouts' ledger bars above the timeline (panels/ledger_bar.js)
 * @property {HTMLCanvasElement} ovCanvas
 * @property {HTMLElement} scrollEl
 * @property {HTMLCanvasElement} canvas
 * @property {HTMLElement} spacer
 * @property {HTMLElement} tooltip
 * @property {HTMLElement} sideEl
 * @property {HTMLElement} detailsEl
 * @property {HTMLElement} brushEl
 * @property {HTMLElement} diffEl
 * @property {HTMLElement} criticalEl the critical path list (critical_panel.js)
 * @property {HTMLElement} flameEl the flame view (icicle.js), hidden while off
 * @property {HTMLElement} footerEl
 * @property {HTMLElement} footerView
 */

/**
 * Build the skeleton and append it to `host`.
 * @param {HTMLElement} host
 * @returns {Shell}
 */
export function buildShell(host) {
  const root = el("div", "stw-root");
  root.tabIndex = 0;
  root.setAttribute("role", "application");
  root.setAttribute("aria-label", "trace timeline");
  const headerEl = el("div", "stw-header");
  const statsEl = el("div", "stw-stats");
  const legendEl = el("div", "stw-legend");
  const body = el("div", "stw-body");
  const mainEl = el("div", "stw-main");
  const ledgerEl = el("div", "stw-ledger");
  ledgerEl.hidden = true;
  const ovCanvas = /** @type {HTMLCanvasElement} */ (el("canvas", "stw-overview"));
  const scrollEl = el("div", "stw-scroll");
  const canvas = /** @type {HTMLCanvasElement} */ (el("canvas", "stw-canvas"));
  const spacer = el("div", "stw-spacer");
  const tooltip = el("div", "stw-tooltip");
  tooltip.hidden = true;
  const sideEl = el("div", "stw-side");
  const detailsEl = el("div", "stw-panel stw-details");
  const brushEl = el("div", "stw-panel stw-brushpanel");
  const diffEl = el("div", "stw-panel stw-diffpanel");
  const criticalEl = el("div", "stw-panel stw-critical");
  const flameEl = el("div", "stw-flame");
  flameEl.hidden = true;
  const footerEl = el("div", "stw-footer");
  const footerView = el("span", "stw-footer-view");
  const footerHint = el("span", "stw-footer-hint", HINT);
  footerEl.appendChild(footerView);
  footerEl.appendChild(footerHint);
  scrollEl.appendChild(canvas);
  scrollEl.appendChild(spacer);
  mainEl.appendChild(ledgerEl);
  mainEl.appendChild(ovCanvas);
  mainEl.appendChild(scrollEl);
  mainEl.appendChild(tooltip);
  sideEl.appendChild(diffEl);
  sideEl.appendChild(criticalEl);
  sideEl.appendChild(detailsEl);
  sideEl.appendChild(brushEl);
  body.appendChild(mainEl);
  body.appendChild(sideEl);
  root.appendChild(headerEl);
  root.appendChild(statsEl);
  root.appendChild(legendEl);
  root.appendChild(body);
  root.appendChild(flameEl);
  root.appendChild(footerEl);
  host.appendChild(root);
  const shell = { root, headerEl, statsEl, legendEl, mainEl, ledgerEl, ovCanvas, scrollEl, canvas, spacer, tooltip, sideEl, detailsEl, brushEl, diffEl, criticalEl, flameEl, footerEl, footerView };
  updateSide(shell);
  return shell;
}

/**
 * Show the side column only when one of its panels (details, range, diff,
 * critical path) has content.
 * @param {Pick<Shell, "root"|"sideEl"|"detailsEl"|"brushEl"|"diffEl"|"criticalEl">} ui
 */
export function updateSide(ui) {
  const panels = [ui.detailsEl, ui.brushEl, ui.diffEl, ui.criticalEl];
  for (const panel of panels) panel.hidden = panel.childElementCount === 0;
  const any = panels.some((panel) => !panel.hidden);
  ui.sideEl.hidden = !any;
  ui.root.classList.toggle("stw-has-side", any);
}

/**
 * The footer's line about the view: its window, the dump's length, spans and events.
 * @param {HTMLElement} footerView
 * @param {import("../data/decode.js").Data} data
 * @param {{t0: number, t1: number}} view
 */
export function updateFooter(footerView, data, view) {
  const txt = `view ${formatDuration(view.t0)} – ${formatDuration(view.t1)} (${formatDuration(view.t1 - view.t0)}) · dump ${formatDuration(data.timesEnd - data.timesStart)} · ${formatNumber(data.nSpans)} spans · ${formatNumber(data.nEvents)} events`;
  if (footerView.textContent !== txt) footerView.textContent = txt;
}
