// Figures of the run overview's cells (run_table.js): bar scales and cell text.

/**
 * @typedef {Record<string, string|number|null>} RunRow one dump's figures
 * @typedef {{label: string, key: string, kind: "text"|"number"|"share"}} RunColumn
 */

/**
 * Largest finite value of each numeric column (0 when there is none).
 * @param {RunRow[]} rows
 * @param {RunColumn[]} columns
 * @returns {Record<string, number>}
 */
export function columnMaxima(rows, columns) {
  /** @type {Record<string, number>} */
  const out = {};
  for (const { key, kind } of columns) {
    if (kind === "text") continue;
    let top = 0;
    for (const row of rows) {
      const value = row[key];
      if (typeof value === "number" && Number.isFinite(value) && value > top) top = value;
    }
    out[key] = top;
  }
  return out;
}

/**
 * A cell's text: shares as percent, seconds and counts with three digits below 100 and
 * whole from 100 on ("1235", where toPrecision wrote "1.23e+3" for a 20-minute rollout
 * and could not tell 1226 s from 1234 s), "–" when missing.
 * @param {string|number|null|undefined} value
 * @param {RunColumn["kind"]} kind
 */
export function cellText(value, kind) {
  if (value === null || value === undefined || (typeof value === "number" && !Number.isFinite(value))) return "–";
  if (typeof value !== "number") return String(value);
  if (kind === "share") return `${(value * 100).toFixed(1)}%`;
  if (Number.isInteger(value)) return String(value);
  return Math.abs(value) >= 99.95 ? String(Math.round(value)) : value.toPrecision(3);
}
