// The payload's meta as the renderer reads it: every documented field present, and
// each kept only where well formed, whichever producer wrote it (docs/payload.md).

import { decodeLedger } from "./fates.js";
import CONTRACT from "../../../slime_trace_widget/view/payload_contract.json" with { type: "json" };
import VOCABULARIES from "../../../slime_trace_widget/vocabularies.json" with { type: "json" };

/** The meta's string tables (names, statuses...), each with the columns whose codes index it. */
export const CODE_TABLES = Object.keys(CONTRACT.code_tables);
/** The meta's per-sample strings (`meta.samples`), `row` first. */
export const SAMPLE_STRINGS = CONTRACT.sample_strings;
/**
 * The mark of each PD role in a lane label ("P", "D"): the letter its virtual lanes'
 * name suffix (" [P]") brackets.
 * @type {Record<string, string>}
 */
export const PD_ROLE_MARKS = Object.fromEntries(
  Object.entries(VOCABULARIES.pd_lane_suffixes).map(([phase, suffix]) => [phase, String(suffix).trim().replace(/^\[|\]$/g, "")]),
);

/**
 * @typedef {Object} Meta
 * @property {string} title
 * @property {number} t0
 * @property {number} t1
 * @property {number} n_samples_total
 * @property {string[]} names
 * @property {string[]} statuses
 * @property {string[]} sources
 * @property {string[]} rollouts
 * @property {{row: number[], sample_index: (number|null)[], group_index: (number|null)[], trace_id: (string|null)[], label: (string|null)[]}} samples
 * @property {Record<string, string>} columns
 * @property {boolean} attrs_embedded
 * @property {string} align
 * @property {Record<string, string[]>} engine_phases slice names by engine phase (with engine spans)
 * @property {Record<string, string>} engine_roles the PD role (prefill, decode) of each request span name
 * @property {string[]} load_engines names of the engines whose load the payload carries (load_tracks.js)
 * @property {import("./fates.js").Ledger} ledger the rollouts' ledger and 90%-finished instants (fates.js)
 * @property {Record<string, number>} warnings what the loader skipped or repaired, counted by kind (empty: nothing)
 */

/** @param {unknown} value */
function arr(value) {
  return Array.isArray(value) ? value : [];
}

/**
 * Normalise `meta` so every documented field is present.
 * @param {any} rawMeta
 * @returns {Meta}
 */
export function normaliseMeta(rawMeta) {
  const meta = rawMeta && typeof rawMeta === "object" ? rawMeta : {};
  const samples = meta.samples && typeof meta.samples === "object" ? meta.samples : {};
  // The tables and per-sample strings are the contract's; the cast names their types.
  return /** @type {Meta} */ ({
    title: typeof meta.title === "string" ? meta.title : "trace timeline",
    t0: Number.isFinite(meta.t0) ? meta.t0 : 0,
    t1: Number.isFinite(meta.t1) ? meta.t1 : 0,
    n_samples_total: Number.isFinite(meta.n_samples_total) ? meta.n_samples_total : -1,
    ...Object.fromEntries(CODE_TABLES.map((table) => [table, arr(meta[table]).map(String)])),
    samples: Object.fromEntries(SAMPLE_STRINGS.map((field) => [field, arr(samples[field])])),
    columns: meta.columns && typeof meta.columns === "object" ? meta.columns : {},
    attrs_embedded: !!meta.attrs_embedded,
    align: meta.align === "rollout" ? "rollout" : "global",
    engine_phases: enginePhaseNames(meta.engine_phases),
    engine_roles: engineRoles(meta.engine_roles),
    load_engines: arr(meta.load_engines).map(String),
    ledger: decodeLedger(meta.ledger, arr(meta.rollouts).length),
    warnings: warningCounts(meta.warnings),
  });
}

/**
 * The loader's warnings from `meta`: positive counts by kind, kept only where well formed.
 * @param {any} value
 * @returns {Record<string, number>}
 */
function warningCounts(value) {
  /** @type {Record<string, number>} */
  const out = Object.create(null); // keys come from the payload: no prototype to reach
  if (!value || typeof value !== "object" || Array.isArray(value)) return out;
  for (const [kind, count] of Object.entries(value)) {
    if (typeof count === "number" && Number.isFinite(count) && count > 0) out[kind] = count;
  }
  return out;
}

/**
 * The engine phases' slice names from `meta`, kept only where well formed.
 * @param {any} value
 * @returns {Record<string, string[]>}
 */
function enginePhaseNames(value) {
  /** @type {Record<string, string[]>} */
  const out = Object.create(null); // keys come from the payload: no prototype to reach
  if (!value || typeof value !== "object" || Array.isArray(value)) return out;
  for (const [phase, names] of Object.entries(value)) {
    if (Array.isArray(names)) out[phase] = names.map(String);
  }
  return out;
}

/**
 * The request span names' PD roles from `meta`, kept only where a role is a PD phase
 * the contract knows.
 * @param {any} value
 * @returns {Record<string, string>}
 */
function engineRoles(value) {
  /** @type {Record<string, string>} */
  const out = Object.create(null); // keys come from the payload: no prototype to reach
  if (!value || typeof value !== "object" || Array.isArray(value)) return out;
  for (const [name, role] of Object.entries(value)) {
    if (typeof role === "string" && Object.hasOwn(PD_ROLE_MARKS, role)) out[name] = role;
  }
  return out;
}
