// The details panel's "Engine vs slime" section for a generation with engine
// requests: what SGLang's own trace says of each request (its `gen_ai.*`
// attributes: latency to first token, queue, end to end, time in the model,
// token usage, finish reason) beside what slime recorded on its generation span
// (`queue_time`, `e2e_latency`, token counts, `finish_reason`), a column per
// request, so they compare at a glance. The attributes come as any item's do
// (the kernel's reply in the notebook, the page's tables in a snapshot); every
// value is data, shown as text.

import { el } from "../util/dom.js";
import { formatDuration } from "../util/format.js";
import { nameOf } from "../data/decode.js";
import { engineRole } from "../data/lane_labels.js";

/** @typedef {import("../data/decode.js").Data} Data */

/**
 * The figures compared: label, slime's attribute on the generation (null: slime
 * records none), the engine's on the request span, and how to show them
 * ("s" seconds, "n" a count, "t" text).
 * @type {[string, string|null, string, "s"|"n"|"t"][]}
 */
export const FIGURES = [
  ["time to first token", null, "gen_ai.latency.time_to_first_token", "s"],
  ["time in queue", "queue_time", "gen_ai.latency.time_in_queue", "s"],
  ["end to end", "e2e_latency", "gen_ai.latency.e2e", "s"],
  ["prefill (in model)", null, "gen_ai.latency.time_in_model_prefill", "s"],
  ["decode (in model)", null, "gen_ai.latency.time_in_model_decode", "s"],
  ["prompt tokens", "prompt_tokens", "gen_ai.usage.prompt_tokens", "n"],
  ["completion tokens", "completion_tokens", "gen_ai.usage.completion_tokens", "n"],
  ["cached tokens", "cached_tokens", "gen_ai.usage.cached_tokens", "n"],
  ["finish reason", "finish_reason", "gen_ai.response.finish_reasons", "t"],
  ["request id", "sglang_request_id", "gen_ai.request.id", "t"],
  ["engine host", null, "engine.host", "t"],
  ["TP ranks", null, "engine.tp_ranks", "t"],
];

/** Characters of a text value shown (the attributes below hold it whole). */
const TEXT_CHARS = 120;

/**
 * An item's attributes as one object: start values, then end values over them.
 * @param {Record<string, any>|null|undefined} detail an attrs reply's `detail`
 * @returns {Record<string, any>}
 */
export function attrsOf(detail) {
  /** @type {Record<string, any>} */
  const out = Object.create(null);
  if (!detail || typeof detail !== "object") return out;
  for (const key of ["start_attrs", "end_attrs"]) {
    const attrs = detail[key];
    if (attrs && typeof attrs === "object" && !Array.isArray(attrs)) Object.assign(out, attrs);
  }
  return out;
}

/**
 * A figure's value as shown: seconds as a duration, counts whole, lists joined,
 * anything else as its text (cut); "" when there is none.
 * @param {any} value
 * @param {"s"|"n"|"t"} kind
 */
export function formatFigure(value, kind) {
  if (value === null || value === undefined || value === "") return "";
  if (kind === "s" && typeof value === "number") return formatDuration(value);
  if (kind === "n" && typeof value === "number") return Number.isInteger(value) ? value.toLocaleString("en-US") : String(value);
  let text = "";
  if (Array.isArray(value)) text = value.map((item) => (item !== null && typeof item === "object" ? JSON.stringify(item) : String(item))).join(", ");
  else if (typeof value === "object") text = typeof value.type === "string" ? value.type : JSON.stringify(value);
  else text = String(value);
  return text.length > TEXT_CHARS ? `${text.slice(0, TEXT_CHARS)}…` : text;
}

/**
 * The engine's value against slime's, when both are durations: "+12.0 ms" / "−3.00 ms".
 * @param {any} engine
 * @param {any} slime
 */
export function secondsDelta(engine, slime) {
  if (typeof engine !== "number" || typeof slime !== "number" || !Number.isFinite(engine - slime)) return "";
  const delta = engine - slime;
  return delta === 0 ? "±0" : `${delta > 0 ? "+" : "−"}${formatDuration(Math.abs(delta))}`;
}

/**
 * Whether the engine's and slime's values of a count or text disagree (both present).
 * @param {any} engine
 * @param {any} slime
 * @param {"s"|"n"|"t"} kind
 */
export function disagree(engine, slime, kind) {
  if (kind === "s") return false;
  const left = formatFigure(engine, kind);
  const right = formatFigure(slime, kind);
  return left !== "" && right !== "" && left !== right;
}

/**
 * The table's rows: per figure, slime's value and each request's; figures no one has are left out.
 * @param {Record<string, any>} slime the generation's attributes
 * @param {Record<string, any>[]} requests each request span's attributes
 * @returns {{label: string, kind: "s"|"n"|"t", slime: any, engine: any[]}[]}
 */
export function figureRows(slime, requests) {
  const rows = [];
  for (const [label, slimeKey, engineKey, kind] of FIGURES) {
    const mine = slimeKey ? slime[slimeKey] : undefined;
    const theirs = requests.map((attrs) => attrs[engineKey]);
    if (formatFigure(mine, kind) === "" && theirs.every((value) => formatFigure(value, kind) === "")) continue;
    rows.push({ label, kind, slime: mine, engine: theirs });
  }
  return rows;
}

/**
 * Fill `host` with the comparison (or why there is none).
 * @param {HTMLElement} host
 * @param {Data} data
 * @param {number[]} requests the request spans (internal indices), one column each
 * @param {{status: "loading"|"ok"|"error", slime?: Record<string, any>|null, requests?: (Record<string, any>|null)[], error?: string}} st
 */
export function renderEngineFigures(host, data, requests, st) {
  host.replaceChildren();
  host.appendChild(el("div", "stw-sec-title", "Engine vs slime"));
  if (st.status === "loading") {
    host.appendChild(el("div", "stw-loading", "loading…"));
    return;
  }
  if (st.status === "error") {
    host.appendChild(el("div", "stw-empty", `not available: ${st.error || "no attributes"}`));
    return;
  }
  const slime = attrsOf(st.slime);
  const theirs = (st.requests ?? []).map((detail) => attrsOf(detail));
  const rows = figureRows(slime, theirs);
  if (!rows.length) {
    host.appendChild(el("div", "stw-empty", "no figures: neither the generation nor its engine requests carry them"));
    return;
  }
  const table = el("table", "stw-table stw-engine-figures");
  const head = el("tr");
  head.appendChild(el("th", "stw-col-name", "figure"));
  head.appendChild(el("th", "stw-num", "slime"));
  requests.forEach((span) => {
    const role = engineRole(data, span);
    const cell = el("th", "stw-num", role ? `engine [${role}]` : "engine");
    cell.title = nameOf(data, data.spanName[span]);
    head.appendChild(cell);
  });
  const thead = el("thead");
  thead.appendChild(head);
  table.appendChild(thead);
  const body = el("tbody");
  for (const row of rows) {
    const tr = el("tr");
    tr.appendChild(el("td", "stw-col-name", row.label));
    tr.appendChild(el("td", "stw-num", formatFigure(row.slime, row.kind) || "—"));
    row.engine.forEach((value) => {
      const cell = el("td", "stw-num", formatFigure(value, row.kind) || "—");
      const delta = row.kind === "s" ? secondsDelta(value, row.slime) : "";
      if (delta) {
        cell.appendChild(el("span", "stw-figure-delta", ` (${delta})`));
        cell.title = "the engine's figure, and how it differs from slime's";
      }
      if (disagree(value, row.slime, row.kind)) {
        cell.classList.add("stw-figure-differs");
        cell.title = "differs from slime's";
      }
      tr.appendChild(cell);
    });
    body.appendChild(tr);
  }
  table.appendChild(body);
  host.appendChild(table);
}
