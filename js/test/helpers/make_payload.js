// Build payloads in the docs/payload.md format from plain arrays, so tests
// (and the dev harness) need no Python.

import { CTORS, DEFAULT_DTYPES } from "../../src/data/decode.js";

/** Each column's dtype and typed-array constructor, from the payload contract. */
export const COLUMNS = /** @type {Record<string, [string, any]>} */ (
  Object.fromEntries(Object.entries(DEFAULT_DTYPES).map(([name, dtype]) => [name, [dtype, CTORS[dtype]]]))
);

/**
 * Pack typed columns into `buffers` of DataViews. With `unaligned`, all
 * columns share one ArrayBuffer and each starts at an odd byte offset (what a
 * kernel message can deliver).
 * @param {Record<string, ArrayLike<number>>} cols
 * @param {{unaligned?: boolean, as?: "dataview"|"arraybuffer"|"uint8"|"base64"}} [opt]
 */
export function packBuffers(cols, opt = {}) {
  /** @type {Record<string, any>} */
  const buffers = {};
  /** @type {Record<string, string>} */
  const columns = {};
  const typed = Object.entries(cols).map(([name, values]) => {
    const [dtype, C] = COLUMNS[name];
    columns[name] = dtype;
    const arr = values instanceof C ? values : C.from(values);
    return [name, new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength)];
  });
  if (opt.unaligned) {
    let total = 0;
    for (const [, bytes] of typed) total += 1 + bytes.byteLength + 8;
    const big = new ArrayBuffer(total);
    let off = 1;
    for (const [name, bytes] of typed) {
      new Uint8Array(big, off, bytes.byteLength).set(bytes);
      buffers[name] = new DataView(big, off, bytes.byteLength);
      off += bytes.byteLength;
      off += off % 2 === 0 ? 1 : 2; // the next column starts at an odd offset too
    }
    return { buffers, columns };
  }
  for (const [name, bytes] of typed) {
    const copy = new Uint8Array(bytes);
    if (opt.as === "arraybuffer") buffers[name] = copy.buffer;
    else if (opt.as === "uint8") buffers[name] = copy;
    else if (opt.as === "base64") buffers[name] = Buffer.from(copy).toString("base64");
    else buffers[name] = new DataView(copy.buffer);
  }
  return { buffers, columns };
}

/**
 * @typedef {Object} SampleIn
 * @property {number} [start]
 * @property {number} [end]
 * @property {number} [reward]
 * @property {string} [status]
 * @property {string} [source]
 * @property {number} [rollout]
 * @property {number} [attempts]
 * @property {number} [lanes]
 * @property {number} [open]
 * @property {number} [offset]
 * @property {number} [base] smp_base: where the sample's item times count from (0: times as given, from t0)
 * @property {number} [fate] index in the contract's fates (255: none, the default)
 * @property {number} [row]
 * @property {number|null} [sample_index]
 * @property {number|null} [group_index]
 * @property {string|null} [trace_id]
 * @property {string|null} [label]
 */

/**
 * @typedef {Object} SpanIn
 * @property {number} sample
 * @property {number} start
 * @property {number} end
 * @property {string} name
 * @property {number} [lane]
 * @property {number} [depth]
 * @property {number} [flags]
 * @property {number} [attempt]
 * @property {number} [parent] index into the input spans array, -1 none
 */

/**
 * @typedef {Object} SegIn
 * @property {number} span index into the input spans array
 * @property {number} start
 * @property {number} end
 * @property {string} name
 */

/**
 * @typedef {Object} EventIn
 * @property {number} sample
 * @property {number} ts
 * @property {string} name
 * @property {number} [lane]
 * @property {number} [kind]
 * @property {number} [attempt]
 * @property {number} [parent] index into the input spans array
 */

/**
 * @typedef {Object} LinkIn
 * @property {"group"|"attempt"|"remote"} kind
 * @property {{span?: number, event?: number}} from index into the input spans or events array
 * @property {{span?: number, event?: number}} to
 */

/**
 * @typedef {Object} LoadIn
 * @property {number} engine index into meta.load_engines
 * @property {string} track one of the contract's load_tracks
 * @property {number} ts
 * @property {number} value
 */

/**
 * Build a payload from plain arrays. Spans are sorted by (sample, lane,
 * start) and events by (sample, lane, ts) as the contract requires (unless
 * `sort: false`); parent and segment references are remapped. Item times are
 * given from t0 and sent from their sample's `base` (0 unless set). Sample start
 * and end default to the min/max of their spans and events; lanes default to
 * max lane + 1; open counts to the open spans.
 * Load points (`load`) go in as given (their order is the test's to choose).
 * @param {{samples: SampleIn[], spans?: SpanIn[], segs?: SegIn[], events?: EventIn[], links?: LinkIn[], load?: LoadIn[], meta?: Record<string, any>, unaligned?: boolean, as?: "dataview"|"arraybuffer"|"uint8"|"base64", sort?: boolean}} input
 */
export function makePayload(input) {
  const samples = input.samples;
  const spans = input.spans || [];
  const segs = input.segs || [];
  const events = input.events || [];
  const sort = input.sort !== false;
  /** @type {string[]} */
  const names = [];
  /** @type {Map<string, number>} */
  const nameIdx = new Map();
  const nm = (/** @type {string} */ n) => {
    let i = nameIdx.get(n);
    if (i === undefined) {
      i = names.length;
      names.push(n);
      nameIdx.set(n, i);
    }
    return i;
  };
  /** @type {string[]} */
  const statuses = [];
  /** @type {string[]} */
  const sources = [];
  const idxIn = (/** @type {string[]} */ table, /** @type {string} */ v) => {
    let i = table.indexOf(v);
    if (i < 0) {
      i = table.length;
      table.push(v);
    }
    return i;
  };

  const spanOrder = spans.map((_, i) => i);
  if (sort) {
    spanOrder.sort((a, b) => spans[a].sample - spans[b].sample || (spans[a].lane || 0) - (spans[b].lane || 0) || spans[a].start - spans[b].start || a - b);
  }
  const spanNew = new Int32Array(spans.length);
  spanOrder.forEach((orig, k) => (spanNew[orig] = k));
  const evOrder = events.map((_, i) => i);
  if (sort) {
    evOrder.sort((a, b) => events[a].sample - events[b].sample || (events[a].lane || 0) - (events[b].lane || 0) || events[a].ts - events[b].ts || a - b);
  }
  const evNew = new Int32Array(events.length);
  evOrder.forEach((orig, k) => (evNew[orig] = k));

  const S = samples.length;
  const lo = new Array(S).fill(Infinity);
  const hi = new Array(S).fill(-Infinity);
  const lanes = new Array(S).fill(0);
  const open = new Array(S).fill(0);
  for (const sp of spans) {
    lo[sp.sample] = Math.min(lo[sp.sample], sp.start);
    hi[sp.sample] = Math.max(hi[sp.sample], sp.end);
    lanes[sp.sample] = Math.max(lanes[sp.sample], (sp.lane || 0) + 1);
    if ((sp.flags || 0) & 1) open[sp.sample]++;
  }
  for (const ev of events) {
    lo[ev.sample] = Math.min(lo[ev.sample], ev.ts);
    hi[ev.sample] = Math.max(hi[ev.sample], ev.ts);
  }

  /** @type {Record<string, number[]>} */
  const c = {};
  for (const k of Object.keys(COLUMNS)) c[k] = [];
  samples.forEach((s, i) => {
    c.smp_start.push(s.start ?? (lo[i] === Infinity ? NaN : lo[i]));
    c.smp_end.push(s.end ?? (hi[i] === -Infinity ? NaN : hi[i]));
    c.smp_reward.push(s.reward ?? NaN);
    c.smp_status.push(idxIn(statuses, s.status ?? "completed"));
    c.smp_source.push(idxIn(sources, s.source ?? "math"));
    c.smp_rollout.push(s.rollout ?? 0);
    c.smp_attempts.push(s.attempts ?? 1);
    c.smp_lanes.push(s.lanes ?? lanes[i]);
    c.smp_open.push(s.open ?? open[i]);
    c.smp_offset.push(s.offset ?? 0);
    c.smp_base.push(s.base ?? 0);
    c.smp_fate.push(s.fate ?? 255);
  });
  const baseOf = (/** @type {number} */ sample) => samples[sample]?.base ?? 0;
  for (const orig of spanOrder) {
    const sp = spans[orig];
    c.span_sample.push(sp.sample);
    c.span_start.push(sp.start - baseOf(sp.sample));
    c.span_end.push(sp.end - baseOf(sp.sample));
    c.span_dur.push(sp.dur ?? ((sp.flags || 0) & 1 ? NaN : sp.end - sp.start));
    c.span_name.push(nm(sp.name));
    c.span_lane.push(sp.lane || 0);
    c.span_depth.push(sp.depth || 0);
    c.span_flags.push(sp.flags || 0);
    c.span_attempt.push(sp.attempt || 0);
    c.span_parent.push(sp.parent === undefined || sp.parent < 0 ? -1 : sort ? spanNew[sp.parent] : sp.parent);
  }
  for (const sg of segs) {
    c.seg_span.push(sort ? spanNew[sg.span] : sg.span);
    c.seg_start.push(sg.start - baseOf(spans[sg.span]?.sample ?? -1));
    c.seg_end.push(sg.end - baseOf(spans[sg.span]?.sample ?? -1));
    c.seg_name.push(nm(sg.name));
  }
  for (const orig of evOrder) {
    const ev = events[orig];
    c.ev_sample.push(ev.sample);
    c.ev_ts.push(ev.ts - baseOf(ev.sample));
    c.ev_name.push(nm(ev.name));
    c.ev_lane.push(ev.lane || 0);
    c.ev_kind.push(ev.kind || 0);
    c.ev_attempt.push(ev.attempt || 0);
    c.ev_parent.push(ev.parent === undefined || ev.parent < 0 ? -1 : sort ? spanNew[ev.parent] : ev.parent);
  }
  const end = (/** @type {{span?: number, event?: number}} */ e) =>
    e.span !== undefined ? (sort ? spanNew[e.span] : e.span) : -1 - (sort ? evNew[e.event ?? 0] : e.event ?? 0);
  for (const link of input.links || []) {
    c.link_kind.push(["group", "attempt", "remote"].indexOf(link.kind));
    c.link_from.push(end(link.from));
    c.link_to.push(end(link.to));
  }
  for (const point of input.load || []) {
    c.load_engine.push(point.engine);
    c.load_track.push(["running", "queued", "token_usage", "throughput", "retractions"].indexOf(point.track));
    c.load_ts.push(point.ts);
    c.load_value.push(point.value);
  }
  const { buffers, columns } = packBuffers(c, { unaligned: input.unaligned, as: input.as });
  const allTimes = [...c.smp_start, ...c.smp_end].filter((v) => Number.isFinite(v));
  const meta = {
    title: "test.pt",
    t0: 1.7e9,
    t1: 1.7e9 + (allTimes.length ? Math.max(...allTimes) : 0),
    n_samples_total: S,
    names,
    statuses,
    sources,
    rollouts: ["rollout 0"],
    samples: {
      row: samples.map((s, i) => s.row ?? i),
      sample_index: samples.map((s, i) => (s.sample_index === undefined ? i : s.sample_index)),
      group_index: samples.map((s, i) => (s.group_index === undefined ? Math.floor(i / 4) : s.group_index)),
      trace_id: samples.map((s, i) => (s.trace_id === undefined ? `trace${i.toString(16).padStart(8, "0")}` : s.trace_id)),
      label: samples.map((s) => (s.label === undefined ? null : s.label)),
    },
    columns,
    attrs_embedded: false,
    align: "global",
    ...(input.meta || {}),
  };
  return { payload: { version: 1, meta, buffers }, spanNew, evNew, names };
}

/**
 * Deterministic PRNG (mulberry32) for reproducible random tests.
 * @param {number} seed
 */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
