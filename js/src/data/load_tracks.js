// The engines' load (docs/payload.md "Engine load"): counter tracks of running and
// queued requests, KV-cache token usage, throughput and retractions, one series
// per (engine, track), scraped at instants in the dump's clock (each engine's
// clock skew already taken out). A track holds its last scraped value until the
// next scrape (step-wise), so the value at an instant is the last scrape at or
// before it. Summed across engines, the tracks add up, except token usage,
// where "summed" is the fullest engine (the max).

import { CTORS, toTyped } from "./bytes.js";
import CONTRACT from "../../../slime_trace_widget/view/payload_contract.json" with { type: "json" };
import VOCABULARIES from "../../../slime_trace_widget/vocabularies.json" with { type: "json" };

/** Track names, in the order the timeline stacks them (`load_track` codes index it). */
export const LOAD_TRACKS = /** @type {string[]} */ (VOCABULARIES.load_tracks);

/** How a track's series combine across engines, "sum" or "max" (vocabularies.json; the kernel combines an engine's scheduler groups so). */
export const COMBINE = /** @type {Record<string, "sum"|"max">} */ (VOCABULARIES.load_track_combine);
/** Each track's unit (vocabularies.json); a "ratio" is a share of 1, read as a percentage. */
export const UNITS = /** @type {Record<string, string>} */ (VOCABULARIES.load_track_units);

/** What each track counts, as the timeline names it. */
export const TRACK_LABELS = /** @type {Record<string, string>} */ ({
  running: "running",
  queued: "queued",
  token_usage: "KV tokens",
  throughput: "tok/s",
  retractions: "retractions",
});

/**
 * One counter series, times sorted.
 * @typedef {Object} Series
 * @property {number} engine index in Load.engines; -1 for all engines together
 * @property {string} track one of LOAD_TRACKS
 * @property {Float64Array} ts scrape times (seconds from meta.t0)
 * @property {Float64Array} value value from that scrape on
 */

/**
 * @typedef {Object} Load
 * @property {string[]} engines engine names (`meta.load_engines`)
 * @property {Series[]} series per engine and track, by engine then track
 * @property {number} n points in the payload
 * @property {Map<string, Series>} combined all engines together, per track (filled on demand)
 */

/**
 * The load columns of a payload as series. Missing columns mean no load; columns
 * of unequal length are read to the shortest; a series out of time order is sorted.
 * @param {Record<string, unknown>} buffers
 * @param {Record<string, string>} columns dtypes (meta.columns), the contract's when absent
 * @param {string[]} engines `meta.load_engines`
 * @returns {Load}
 */
export function decodeLoad(buffers, columns, engines) {
  const read = (/** @type {string} */ name) => {
    const dtype = /** @type {import("./bytes.js").Dtype} */ (columns[name] || /** @type {Record<string, string>} */ (CONTRACT.columns)[name]);
    const raw = buffers[name];
    return raw === undefined || raw === null || !CTORS[dtype] ? null : toTyped(raw, dtype);
  };
  const engine = read("load_engine");
  const track = read("load_track");
  const ts = read("load_ts");
  const value = read("load_value");
  /** @type {Load} */
  const load = { engines: engines.slice(), series: [], n: 0, combined: new Map() };
  if (!engine || !track || !ts || !value) return load;
  const n = Math.min(engine.length, track.length, ts.length, value.length);
  /** @type {Map<number, number[]>} */
  const groups = new Map();
  for (let i = 0; i < n; i++) {
    if (track[i] >= LOAD_TRACKS.length || !Number.isFinite(ts[i])) continue;
    const key = engine[i] * 256 + track[i];
    let members = groups.get(key);
    if (!members) groups.set(key, (members = []));
    members.push(i);
  }
  for (const key of [...groups.keys()].sort((first, second) => first - second)) {
    const members = /** @type {number[]} */ (groups.get(key));
    if (!isSortedBy(members, ts)) members.sort((first, second) => ts[first] - ts[second] || first - second);
    const series = { engine: Math.floor(key / 256), track: LOAD_TRACKS[key % 256], ts: new Float64Array(members.length), value: new Float64Array(members.length) };
    members.forEach((i, k) => {
      series.ts[k] = ts[i];
      series.value[k] = value[i];
    });
    while (load.engines.length <= series.engine) load.engines.push(`engine ${load.engines.length}`);
    load.series.push(series);
    load.n += members.length;
  }
  return load;
}

/**
 * @param {number[]} members
 * @param {ArrayLike<number>} ts
 */
function isSortedBy(members, ts) {
  for (let k = 1; k < members.length; k++) if (ts[members[k]] < ts[members[k - 1]]) return false;
  return true;
}

/**
 * Index of the last scrape at or before `time`, -1 when none.
 * @param {ArrayLike<number>} ts sorted
 * @param {number} time
 */
export function lastAtOrBefore(ts, time) {
  let lo = 0;
  let hi = ts.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ts[mid] <= time) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/**
 * A series' value at `time`: its last scrape at or before it (NaN before the first).
 * @param {Series} series
 * @param {number} time
 */
export function valueAt(series, time) {
  const index = lastAtOrBefore(series.ts, time);
  return index < 0 ? NaN : series.value[index];
}

/**
 * Several engines' series of one track as one: at every scrape of any of them,
 * the sum (or, with `how` "max", the max) of each engine's value then; an engine
 * counts from its first scrape on.
 * @param {Series[]} parts
 * @param {string} track
 * @param {"sum"|"max"} how
 * @returns {Series}
 */
export function combineSeries(parts, track, how) {
  const total = parts.reduce((sum, part) => sum + part.ts.length, 0);
  const order = new Uint32Array(total);
  const owner = new Uint32Array(total);
  const at = new Uint32Array(total);
  let k = 0;
  parts.forEach((part, p) => {
    for (let i = 0; i < part.ts.length; i++) {
      order[k] = k;
      owner[k] = p;
      at[k++] = i;
    }
  });
  const timeOf = (/** @type {number} */ entry) => parts[owner[entry]].ts[at[entry]];
  const sorted = Array.from(order).sort((first, second) => timeOf(first) - timeOf(second) || first - second);
  const current = new Float64Array(parts.length).fill(NaN);
  const ts = [];
  const value = [];
  let sum = 0;
  for (let position = 0; position < sorted.length; position++) {
    const entry = sorted[position];
    const time = timeOf(entry);
    const next = parts[owner[entry]].value[at[entry]];
    const before = current[owner[entry]];
    sum += next - (Number.isNaN(before) ? 0 : before);
    current[owner[entry]] = next;
    if (position + 1 < sorted.length && timeOf(sorted[position + 1]) === time) continue; // one point per instant
    ts.push(time);
    value.push(how === "max" ? maxOf(current) : sum);
  }
  return { engine: -1, track, ts: Float64Array.from(ts), value: Float64Array.from(value) };
}

/** @param {Float64Array} values NaN: not yet scraped */
function maxOf(values) {
  let best = NaN;
  for (const value of values) {
    if (Number.isNaN(value)) continue;
    if (Number.isNaN(best) || value > best) best = value;
  }
  return best;
}

/**
 * The series the timeline draws: per engine (grouped by track, engines in
 * payload order) or all engines together, one per track; tracks without data left out.
 * @param {Load} load
 * @param {boolean} split one series per engine
 * @returns {Series[]}
 */
export function drawnSeries(load, split) {
  /** @type {Series[]} */
  const out = [];
  for (const track of LOAD_TRACKS) {
    const parts = load.series.filter((series) => series.track === track);
    if (!parts.length) continue;
    if (split) {
      out.push(...parts);
      continue;
    }
    let combined = load.combined.get(track);
    if (!combined) {
      combined = parts.length === 1 ? { ...parts[0], engine: -1 } : combineSeries(parts, track, COMBINE[track] ?? "sum");
      load.combined.set(track, combined);
    }
    out.push(combined);
  }
  return out;
}

/**
 * The largest value of the series of `track` in `list` (the scale a track's
 * series share, so engines compare), at least 1e-9.
 * @param {Series[]} list
 * @param {string} track
 */
export function trackMax(list, track) {
  let best = 1e-9;
  for (const series of list) {
    if (series.track !== track) continue;
    for (const value of series.value) if (value > best) best = value;
  }
  return best;
}

/**
 * A series' name as the timeline labels it: the track, and the engine's name per engine.
 * @param {Load} load
 * @param {Series} series
 */
export function seriesLabel(load, series) {
  const label = TRACK_LABELS[series.track] ?? series.track;
  return series.engine < 0 ? label : `${label} · ${load.engines[series.engine] ?? series.engine}`;
}

/**
 * A track value as the timeline shows it: a ratio (token usage) in percent, counts whole,
 * rates with three significant digits.
 * @param {string} track
 * @param {number} value
 */
export function formatLoadValue(track, value) {
  if (!Number.isFinite(value)) return "—";
  if (UNITS[track] === "ratio" && value <= 1.0001) return `${(value * 100).toFixed(value < 0.1 ? 1 : 0)}%`;
  if (Number.isInteger(value)) return value.toLocaleString("en-US");
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString("en-US");
  return Number(value.toPrecision(3)).toString();
}
