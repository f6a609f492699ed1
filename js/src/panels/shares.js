// A table of named durations and their share of a whole (the details panel's PD
// phases and engine phases): name with its colour, milliseconds, % with a bar.

import { el } from "../util/dom.js";
import { formatMs, formatPct } from "../util/format.js";

/**
 * An empty share table with its header row; rows go into the returned body.
 * @param {string} className
 * @param {string} nameTitle
 * @returns {{table: HTMLElement, body: HTMLElement}}
 */
export function shareTable(className, nameTitle) {
  const table = el("table", className);
  const head = el("tr");
  for (const title of [nameTitle, "ms", "%"]) head.appendChild(el("th", title === nameTitle ? "stw-col-name" : "stw-num", title));
  const thead = el("thead");
  thead.appendChild(head);
  table.appendChild(thead);
  const body = el("tbody");
  table.appendChild(body);
  return { table, body };
}

/**
 * One row: `label` with a swatch of `color`, `seconds` in ms, its share of `total`.
 * @param {string} label
 * @param {number} seconds
 * @param {number} total
 * @param {string} color
 * @param {string} [className]
 * @returns {HTMLElement}
 */
export function shareRow(label, seconds, total, color, className = "") {
  const row = el("tr", className);
  const name = el("td");
  const cell = el("div", "stw-name-cell");
  const swatch = el("span", "stw-swatch");
  swatch.style.background = color;
  cell.appendChild(swatch);
  cell.appendChild(el("span", "stw-ellipsis", label));
  cell.title = label;
  name.appendChild(cell);
  row.appendChild(name);
  row.appendChild(el("td", "stw-num", formatMs(seconds).replace(" ms", "")));
  const share = el("td", "stw-num", formatPct(seconds / total));
  const bar = el("div", "stw-minibar");
  bar.style.width = `${Math.max(1, Math.round((seconds / total) * 100))}%`;
  bar.style.background = color;
  share.appendChild(bar);
  row.appendChild(share);
  return row;
}
