// The details panel's "Engine phases" table: seconds and share of each phase
// of a generation's time inside the engine (data/engine.js computes them).

import { colorForName } from "../render/colors.js";
import { el } from "../util/dom.js";
import { formatMs, formatPct } from "../util/format.js";

/** @typedef {import("../data/engine.js").EnginePhase} EnginePhase */

/**
 * @param {HTMLElement} host
 * @param {EnginePhase[]} phases
 */
export function renderEnginePhases(host, phases) {
  const total = phases.reduce((sum, row) => sum + row.dur, 0) || 1;
  const table = el("table", "stw-table stw-engine-phases");
  const head = el("tr");
  for (const title of ["phase", "ms", "%"]) head.appendChild(el("th", title === "phase" ? "stw-col-name" : "stw-num", title));
  const thead = el("thead");
  thead.appendChild(head);
  table.appendChild(thead);
  const body = el("tbody");
  for (const row of phases) {
    const tr = el("tr");
    const name = el("td");
    const cell = el("div", "stw-name-cell");
    const swatch = el("span", "stw-swatch");
    swatch.style.background = colorForName(row.phase);
    cell.appendChild(swatch);
    cell.appendChild(el("span", "stw-ellipsis", row.phase));
    name.appendChild(cell);
    tr.appendChild(name);
    tr.appendChild(el("td", "stw-num", formatMs(row.dur).replace(" ms", "")));
    const share = el("td", "stw-num", formatPct(row.dur / total));
    const bar = el("div", "stw-minibar");
    bar.style.width = `${Math.max(1, Math.round((row.dur / total) * 100))}%`;
    bar.style.background = colorForName(row.phase);
    share.appendChild(bar);
    tr.appendChild(share);
    body.appendChild(tr);
  }
  table.appendChild(body);
  host.appendChild(table);
}
