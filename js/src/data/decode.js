// Payload (docs/payload.md) -> typed columns plus derived per-sample and
// per-lane index ranges used by layout, level of detail and hit testing.

import { base64ToBytes } from "./bytes.js";
import CONTRACT from "../../../slime_trace_widget/view/payload_contract.json" with { type: "json" };

/** Span flag bits (slime_trace_widget/view/payload_contract.json). */
export const F_OPEN = CONTRACT.span_flags.open;
export const F_VIRTUAL = CONTRACT.span_flags.virtual;
export const F_ERROR = CONTRACT.span_flags.error;
export const F_PD_DETAIL = CONTRACT.span_flags.pd_detail;
/** On a child-form virtual span: its segments mirror real spans (its children in the critical path and flame). */
export const F_PD_SEGMENT_SPANS = CONTRACT.span_flags.pd_segment_spans;
export const F_ENGINE = CONTRACT.span_flags.engine;
export const CLIP_SHIFT = CONTRACT.clip_shift;
/** @param {number} flags */
export const clipReasonOf = (flags) => (flags >> CLIP_SHIFT) & 3;
/** Clip reason of code k (0 = none), as shown. */
export const CLIP_REASONS = ["", ...CONTRACT.clip_reasons.map((r) => r.replace(/_/g, " "))];

/** Lane kinds (bits of Data.laneKind). */
export const LK_SPANS = CONTRACT.lane_kinds.spans;
export const LK_VIRTUAL = CONTRACT.lane_kinds.virtual;
export const LK_DETAIL = CONTRACT.lane_kinds.detail;

/** Event kinds (ev_kind codes). */
export const EV_INSTANT = CONTRACT.event_kinds.indexOf("instant");
export const EV_UNMATCHED = CONTRACT.event_kinds.indexOf("unmatched_end");

/** Link kinds (link_kind codes): "group", "attempt", "remote". */
export const LINK_KINDS = /** @type {string[]} */ (CONTRACT.link_kinds);

/** PD phase of a virtual span. */
export const PD_NONE = CONTRACT.pd_phases.none;
export const PD_PREFILL = CONTRACT.pd_phases.prefill;
export const PD_DECODE = CONTRACT.pd_phases.decode;

/**
 * @typedef {Uint8Array|Uint16Array|Uint32Array|Int32Array|Float32Array|Float64Array} Typed
 * @typedef {"u1"|"u2"|"u4"|"i4"|"f4"|"f8"} Dtype
 */

/** Typed-array constructor of each dtype. @type {Record<Dtype, any>} */
export const CTORS = {
  u1: Uint8Array,
  u2: Uint16Array,
  u4: Uint32Array,
  i4: Int32Array,
  f4: Float32Array,
  f8: Float64Array,
};

/** Dtypes of the columns (the contract), used when meta.columns omits one. */
export const DEFAULT_DTYPES = /** @type {Record<string, Dtype>} */ (CONTRACT.columns);

const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

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
 */

/**
 * @typedef {Object} Data
 * @property {Meta} meta
 * @property {string[]} names
 * @property {number} nSamples
 * @property {number} nSpans
 * @property {number} nSegs
 * @property {number} nEvents
 * @property {Float32Array} smpStart
 * @property {Float32Array} smpEnd
 * @property {Float64Array} smpReward
 * @property {Uint8Array} smpStatus
 * @property {Uint16Array} smpSource
 * @property {Uint16Array} smpRollout
 * @property {Uint16Array} smpAttempts
 * @property {Uint16Array} smpLanes
 * @property {Uint32Array} smpOpen
 * @property {Float32Array} smpOffset
 * @property {Uint32Array} spanSample
 * @property {Float32Array} spanStart
 * @property {Float32Array} spanEnd
 * @property {Uint16Array} spanName
 * @property {Uint8Array} spanLane
 * @property {Uint8Array} spanDepth
 * @property {Uint8Array} spanFlags
 * @property {Uint8Array} spanAttempt
 * @property {Int32Array} spanParent
 * @property {Uint32Array} segSpan
 * @property {Float32Array} segStart
 * @property {Float32Array} segEnd
 * @property {Uint16Array} segName
 * @property {Uint32Array} evSample
 * @property {Float32Array} evTs
 * @property {Uint16Array} evName
 * @property {Uint8Array} evLane
 * @property {Uint8Array} evKind
 * @property {Uint8Array} evAttempt
 * @property {Int32Array} evParent
 * @property {number} nLinks
 * @property {Uint8Array} linkKind index in LINK_KINDS
 * @property {Int32Array} linkFrom endpoint: span i as i, event j as -1 - j
 * @property {Int32Array} linkTo endpoint, as linkFrom
 * @property {Uint32Array} spanOff per sample, spans [spanOff[s], spanOff[s+1])
 * @property {Uint32Array} evOff per sample, events [evOff[s], evOff[s+1])
 * @property {Uint16Array} nLanes lanes of each sample when expanded
 * @property {Uint32Array} laneBase first lane slot of each sample (length nSamples+1)
 * @property {Uint32Array} laneSpanOff spans of lane slot k: [laneSpanOff[k], laneSpanOff[k+1])
 * @property {Uint32Array} laneEvOff events of lane slot k: [laneEvOff[k], laneEvOff[k+1])
 * @property {Float32Array} spanEndMax running max of span end within its lane (for culling)
 * @property {Uint8Array} laneKind per lane slot: bit 0 drawable spans, bit 1 virtual PD spans, bit 2 PD-detail spans
 * @property {Uint32Array} segOrder segment indices grouped by virtual span, by start
 * @property {Uint32Array} spanSegOff segments of span i: segOrder[spanSegOff[i] .. spanSegOff[i+1])
 * @property {Uint8Array} spanPd PD phase of each span (virtual spans only)
 * @property {Uint8Array} spanHasChild bit 0: a drawn (non-PD) span has this span as parent; bit 1: a virtual PD span does
 * @property {number} maxAttempt highest attempt seen (0-based)
 * @property {number} globalStart
 * @property {number} globalEnd
 * @property {boolean} hasPd
 */

/**
 * Turn one buffer (DataView, ArrayBuffer, any typed array, base64 string or a
 * plain number array) into a typed array of `dtype`. Views whose byte offset is
 * not a multiple of the element size are copied (typed arrays need alignment).
 * @param {unknown} buf
 * @param {Dtype} dtype
 * @returns {Typed}
 */
export function toTyped(buf, dtype) {
  const C = CTORS[dtype];
  if (!C) throw new Error(`payload: unknown dtype ${JSON.stringify(dtype)}`);
  const size = C.BYTES_PER_ELEMENT;
  if (buf === null || buf === undefined) return new C(0);
  if (Array.isArray(buf)) return C.from(buf.map((v) => (v === null ? NaN : v)));
  /** @type {ArrayBufferLike} */
  let ab;
  let off = 0;
  let len = 0;
  if (typeof buf === "string") {
    const bytes = base64ToBytes(buf);
    ab = bytes.buffer;
    len = bytes.byteLength;
  } else if (buf instanceof ArrayBuffer || (typeof SharedArrayBuffer !== "undefined" && buf instanceof SharedArrayBuffer)) {
    ab = buf;
    len = buf.byteLength;
  } else if (ArrayBuffer.isView(buf)) {
    ab = buf.buffer;
    off = buf.byteOffset;
    len = buf.byteLength;
  } else {
    throw new Error(`payload: a ${dtype} buffer is neither bytes nor an array`);
  }
  const n = Math.floor(len / size);
  if (size === 1) return new C(ab, off, n);
  if (LITTLE_ENDIAN_HOST && off % size === 0) return new C(ab, off, n);
  if (LITTLE_ENDIAN_HOST) return new C(ab.slice(off, off + n * size));
  // Big-endian host: read element by element.
  const dv = new DataView(ab, off, n * size);
  const out = new C(n);
  for (let i = 0; i < n; i++) {
    const p = i * size;
    out[i] =
      dtype === "u2" ? dv.getUint16(p, true)
      : dtype === "u4" ? dv.getUint32(p, true)
      : dtype === "i4" ? dv.getInt32(p, true)
      : dtype === "f4" ? dv.getFloat32(p, true)
      : dv.getFloat64(p, true);
  }
  return out;
}

/**
 * @param {Record<string, unknown>} buffers
 * @param {Record<string, string>} columns
 * @param {string} name
 * @param {number} n expected length (-1: take the buffer's length)
 * @param {number} [fill]
 */
function column(buffers, columns, name, n, fill = 0) {
  const dtype = /** @type {Dtype} */ (columns[name] || DEFAULT_DTYPES[name]);
  const raw = buffers[name];
  let arr = raw === undefined || raw === null ? null : toTyped(raw, dtype);
  if (n < 0) return arr || new CTORS[dtype](0);
  if (!arr || arr.length < n) {
    const C = CTORS[dtype];
    const out = new C(n);
    if (fill !== 0) out.fill(fill);
    if (arr) out.set(arr);
    arr = out;
  } else if (arr.length > n) {
    arr = arr.subarray(0, n);
  }
  return arr;
}

/** @param {unknown} a */
function arr(a) {
  return Array.isArray(a) ? a : [];
}

/**
 * Normalise `meta` so every documented field is present.
 * @param {any} m
 * @returns {Meta}
 */
function normaliseMeta(m) {
  const meta = m && typeof m === "object" ? m : {};
  const s = meta.samples && typeof meta.samples === "object" ? meta.samples : {};
  return {
    title: typeof meta.title === "string" ? meta.title : "trace timeline",
    t0: Number.isFinite(meta.t0) ? meta.t0 : 0,
    t1: Number.isFinite(meta.t1) ? meta.t1 : 0,
    n_samples_total: Number.isFinite(meta.n_samples_total) ? meta.n_samples_total : -1,
    names: arr(meta.names).map(String),
    statuses: arr(meta.statuses).map(String),
    sources: arr(meta.sources).map(String),
    rollouts: arr(meta.rollouts).map(String),
    samples: {
      row: arr(s.row),
      sample_index: arr(s.sample_index),
      group_index: arr(s.group_index),
      trace_id: arr(s.trace_id),
      label: arr(s.label),
    },
    columns: meta.columns && typeof meta.columns === "object" ? meta.columns : {},
    attrs_embedded: !!meta.attrs_embedded,
    align: meta.align === "rollout" ? "rollout" : "global",
    engine_phases: enginePhaseNames(meta.engine_phases),
  };
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
 * Check that (key1, key2, t) is non-decreasing; returns true when sorted.
 * @param {ArrayLike<number>} a
 * @param {ArrayLike<number>} b
 * @param {ArrayLike<number>} t
 */
function isSorted(a, b, t) {
  for (let i = 1; i < a.length; i++) {
    const d = a[i] - a[i - 1];
    if (d > 0) continue;
    if (d < 0) return false;
    const e = b[i] - b[i - 1];
    if (e > 0) continue;
    if (e < 0) return false;
    if (t[i] < t[i - 1]) return false;
  }
  return true;
}

/**
 * Decode a payload object into columns and derived ranges.
 * @param {any} payload `{version, meta, buffers}` (docs/payload.md)
 * @returns {Data}
 */
export function decodePayload(payload) {
  const p = payload && typeof payload === "object" ? payload : {};
  if (p.version !== undefined && p.version !== CONTRACT.version) {
    console.warn(`slime-trace-widget: payload version ${p.version} is newer than this renderer (${CONTRACT.version})`);
  }
  const meta = normaliseMeta(p.meta);
  const buffers = /** @type {Record<string, unknown>} */ (p.buffers && typeof p.buffers === "object" ? p.buffers : {});
  const cols = meta.columns;

  const smpStartRaw = column(buffers, cols, "smp_start", -1);
  const nSamples = Math.max(meta.samples.row.length, smpStartRaw.length);
  if (meta.n_samples_total < 0) meta.n_samples_total = nSamples;
  const f = (/** @type {string} */ n, /** @type {number} */ len, fill = 0) => column(buffers, cols, n, len, fill);

  const spanSampleRaw = f("span_sample", -1);
  const nSpans = spanSampleRaw.length;
  const segSpanRaw = f("seg_span", -1);
  const nSegs = segSpanRaw.length;
  const evSampleRaw = f("ev_sample", -1);
  const nEvents = evSampleRaw.length;
  const linkKindRaw = f("link_kind", -1);
  const nLinks = linkKindRaw.length;

  /** @type {Data} */
  const d = {
    meta,
    names: meta.names,
    nSamples,
    nSpans,
    nSegs,
    nEvents,
    smpStart: /** @type {Float32Array} */ (f("smp_start", nSamples, NaN)),
    smpEnd: /** @type {Float32Array} */ (f("smp_end", nSamples, NaN)),
    smpReward: /** @type {Float64Array} */ (f("smp_reward", nSamples, NaN)),
    smpStatus: /** @type {Uint8Array} */ (f("smp_status", nSamples)),
    smpSource: /** @type {Uint16Array} */ (f("smp_source", nSamples)),
    smpRollout: /** @type {Uint16Array} */ (f("smp_rollout", nSamples)),
    smpAttempts: /** @type {Uint16Array} */ (f("smp_attempts", nSamples)),
    smpLanes: /** @type {Uint16Array} */ (f("smp_lanes", nSamples)),
    smpOpen: /** @type {Uint32Array} */ (f("smp_open", nSamples)),
    smpOffset: /** @type {Float32Array} */ (f("smp_offset", nSamples)),
    spanSample: /** @type {Uint32Array} */ (spanSampleRaw),
    spanStart: /** @type {Float32Array} */ (f("span_start", nSpans, NaN)),
    spanEnd: /** @type {Float32Array} */ (f("span_end", nSpans, NaN)),
    spanName: /** @type {Uint16Array} */ (f("span_name", nSpans)),
    spanLane: /** @type {Uint8Array} */ (f("span_lane", nSpans)),
    spanDepth: /** @type {Uint8Array} */ (f("span_depth", nSpans)),
    spanFlags: /** @type {Uint8Array} */ (f("span_flags", nSpans)),
    spanAttempt: /** @type {Uint8Array} */ (f("span_attempt", nSpans)),
    spanParent: /** @type {Int32Array} */ (f("span_parent", nSpans, -1)),
    segSpan: /** @type {Uint32Array} */ (segSpanRaw),
    segStart: /** @type {Float32Array} */ (f("seg_start", nSegs, NaN)),
    segEnd: /** @type {Float32Array} */ (f("seg_end", nSegs, NaN)),
    segName: /** @type {Uint16Array} */ (f("seg_name", nSegs)),
    evSample: /** @type {Uint32Array} */ (evSampleRaw),
    evTs: /** @type {Float32Array} */ (f("ev_ts", nEvents, NaN)),
    evName: /** @type {Uint16Array} */ (f("ev_name", nEvents)),
    evLane: /** @type {Uint8Array} */ (f("ev_lane", nEvents)),
    evKind: /** @type {Uint8Array} */ (f("ev_kind", nEvents)),
    evAttempt: /** @type {Uint8Array} */ (f("ev_attempt", nEvents)),
    evParent: /** @type {Int32Array} */ (f("ev_parent", nEvents, -1)),
    nLinks,
    linkKind: /** @type {Uint8Array} */ (linkKindRaw),
    // A missing endpoint reads as an event past the last one: js/src/data/links.js drops it.
    linkFrom: /** @type {Int32Array} */ (f("link_from", nLinks, -0x80000000)),
    linkTo: /** @type {Int32Array} */ (f("link_to", nLinks, -0x80000000)),
    spanOff: new Uint32Array(nSamples + 1),
    evOff: new Uint32Array(nSamples + 1),
    nLanes: new Uint16Array(nSamples),
    laneBase: new Uint32Array(nSamples + 1),
    laneSpanOff: new Uint32Array(1),
    laneEvOff: new Uint32Array(1),
    spanEndMax: new Float32Array(nSpans),
    laneKind: new Uint8Array(0),
    segOrder: new Uint32Array(nSegs),
    spanSegOff: new Uint32Array(nSpans + 1),
    spanPd: new Uint8Array(nSpans),
    spanHasChild: new Uint8Array(nSpans),
    maxAttempt: 0,
    globalStart: 0,
    globalEnd: 1,
    hasPd: false,
  };

  // Out-of-range sample references would corrupt every range below: drop them
  // by clamping to a sentinel past the last sample (they are then never drawn).
  for (let i = 0; i < nSpans; i++) if (d.spanSample[i] >= nSamples) d.spanSample[i] = nSamples;
  for (let i = 0; i < nEvents; i++) if (d.evSample[i] >= nSamples) d.evSample[i] = nSamples;

  warnIfUnsorted(d);
  deriveRanges(d);
  deriveSegments(d);
  deriveGlobals(d);
  return d;
}

/**
 * The contract sorts spans by (sample, lane, start) and events by
 * (sample, lane, ts), and the encoder checks it (payload.py); the binary
 * searches here rely on it. Another producer that breaks it gets a warning.
 * @param {Data} d
 */
function warnIfUnsorted(d) {
  if (!isSorted(d.spanSample, d.spanLane, d.spanStart)) {
    console.warn("slime-trace-widget: spans not sorted by (sample, lane, start); some may not be drawn or picked");
  }
  if (!isSorted(d.evSample, d.evLane, d.evTs)) {
    console.warn("slime-trace-widget: events not sorted by (sample, lane, ts); some may not be drawn or picked");
  }
}

/**
 * Per-sample and per-lane CSR offsets, lane counts, running max of ends.
 * @param {Data} d
 */
function deriveRanges(d) {
  const { nSamples, nSpans, nEvents } = d;
  // Per-sample offsets (inputs are sorted by sample).
  const spanCount = new Uint32Array(nSamples + 1);
  for (let i = 0; i < nSpans; i++) spanCount[d.spanSample[i]]++;
  for (let s = 0; s < nSamples; s++) d.spanOff[s + 1] = d.spanOff[s] + spanCount[s];
  const evCount = new Uint32Array(nSamples + 1);
  for (let i = 0; i < nEvents; i++) evCount[d.evSample[i]]++;
  for (let s = 0; s < nSamples; s++) d.evOff[s + 1] = d.evOff[s] + evCount[s];

  // Lanes: at least what the sample says, at least what its spans and events use.
  for (let s = 0; s < nSamples; s++) {
    let n = d.smpLanes[s];
    for (let i = d.spanOff[s]; i < d.spanOff[s + 1]; i++) if (d.spanLane[i] + 1 > n) n = d.spanLane[i] + 1;
    for (let i = d.evOff[s]; i < d.evOff[s + 1]; i++) if (d.evLane[i] + 1 > n) n = d.evLane[i] + 1;
    d.nLanes[s] = n;
    d.laneBase[s + 1] = d.laneBase[s] + n;
  }
  const slots = d.laneBase[nSamples];
  d.laneSpanOff = new Uint32Array(slots + 1);
  d.laneEvOff = new Uint32Array(slots + 1);
  for (let s = 0; s < nSamples; s++) {
    const base = d.laneBase[s];
    const nl = d.nLanes[s];
    // Count per lane, then prefix-sum from the sample's first span.
    const lo = d.spanOff[s];
    const hi = d.spanOff[s + 1];
    let i = lo;
    for (let l = 0; l < nl; l++) {
      d.laneSpanOff[base + l] = i;
      while (i < hi && d.spanLane[i] === l) i++;
    }
    const elo = d.evOff[s];
    const ehi = d.evOff[s + 1];
    let j = elo;
    for (let l = 0; l < nl; l++) {
      d.laneEvOff[base + l] = j;
      while (j < ehi && d.evLane[j] === l) j++;
    }
  }
  for (let i = 0; i < nSpans; i++) {
    const p = d.spanParent[i];
    if (p < 0 || p >= nSpans) continue;
    const fl = d.spanFlags[i];
    if (fl & F_VIRTUAL) d.spanHasChild[p] |= 2;
    else if (!(fl & F_PD_DETAIL)) d.spanHasChild[p] |= 1;
  }
  d.laneSpanOff[slots] = nSpans;
  d.laneEvOff[slots] = nEvents;
  // Samples past the last (the out-of-range sentinel) keep their items out of every lane.
  if (nSamples > 0) {
    d.laneSpanOff[slots] = d.spanOff[nSamples];
    d.laneEvOff[slots] = d.evOff[nSamples];
  }

  // Running max of end within each lane: with starts sorted, the first span
  // that can reach time t is the first whose running max end >= t.
  const em = d.spanEndMax;
  d.laneKind = new Uint8Array(slots);
  for (let k = 0; k < slots; k++) {
    let m = -Infinity;
    let kind = 0;
    for (let i = d.laneSpanOff[k]; i < d.laneSpanOff[k + 1]; i++) {
      const fl = d.spanFlags[i];
      kind |= fl & F_VIRTUAL ? LK_VIRTUAL : fl & F_PD_DETAIL ? LK_DETAIL : LK_SPANS;
      let e = d.spanEnd[i];
      if (!(e >= d.spanStart[i])) e = d.spanStart[i];
      if (e > m) m = e;
      em[i] = m;
    }
    d.laneKind[k] = kind;
  }
}

/**
 * Segments grouped by virtual span; PD phase of virtual spans.
 * @param {Data} d
 */
function deriveSegments(d) {
  const { nSpans, nSegs } = d;
  const count = new Uint32Array(nSpans + 1);
  for (let i = 0; i < nSegs; i++) if (d.segSpan[i] < nSpans) count[d.segSpan[i]]++;
  for (let i = 0; i < nSpans; i++) d.spanSegOff[i + 1] = d.spanSegOff[i] + count[i];
  const fill = d.spanSegOff.slice(0, nSpans);
  let n = 0;
  for (let i = 0; i < nSegs; i++) {
    const sp = d.segSpan[i];
    if (sp < nSpans) {
      d.segOrder[fill[sp]++] = i;
      n++;
    }
  }
  if (n < nSegs) d.segOrder = d.segOrder.subarray(0, n);
  // Order each span's segments by start (usually already in order).
  for (let sp = 0; sp < nSpans; sp++) {
    const lo = d.spanSegOff[sp];
    const hi = d.spanSegOff[sp + 1];
    if (hi - lo < 2) continue;
    let sorted = true;
    for (let k = lo + 1; k < hi; k++) if (d.segStart[d.segOrder[k]] < d.segStart[d.segOrder[k - 1]]) sorted = false;
    if (!sorted) {
      const part = Array.from(d.segOrder.subarray(lo, hi)).sort((a, b) => d.segStart[a] - d.segStart[b]);
      d.segOrder.set(part, lo);
    }
  }
  const cache = new Map();
  for (let i = 0; i < nSpans; i++) {
    if (!(d.spanFlags[i] & F_VIRTUAL)) continue;
    d.hasPd = true;
    const nm = d.spanName[i];
    let ph = cache.get(nm);
    if (ph === undefined) {
      const name = (d.names[nm] || "").toLowerCase();
      ph = name.includes("[d]") || name.includes("decode") ? PD_DECODE : PD_PREFILL;
      cache.set(nm, ph);
    }
    d.spanPd[i] = ph;
  }
}

/**
 * Global time range and highest attempt.
 * @param {Data} d
 */
function deriveGlobals(d) {
  let lo = Infinity;
  let hi = -Infinity;
  for (let s = 0; s < d.nSamples; s++) {
    const a = d.smpStart[s];
    const b = d.smpEnd[s];
    if (a < lo) lo = a;
    if (b > hi) hi = b;
    if (a > hi) hi = a;
  }
  if (!(lo <= hi)) {
    for (let i = 0; i < d.nSpans; i++) {
      if (d.spanStart[i] < lo) lo = d.spanStart[i];
      if (d.spanEnd[i] > hi) hi = d.spanEnd[i];
    }
    for (let i = 0; i < d.nEvents; i++) {
      if (d.evTs[i] < lo) lo = d.evTs[i];
      if (d.evTs[i] > hi) hi = d.evTs[i];
    }
  }
  if (!(lo <= hi)) {
    lo = 0;
    hi = Math.max(1, d.meta.t1 - d.meta.t0);
  }
  if (hi - lo < 1e-6) {
    lo -= 0.5;
    hi += 0.5;
  }
  d.globalStart = lo;
  d.globalEnd = hi;
  let ma = 0;
  for (let s = 0; s < d.nSamples; s++) if (d.smpAttempts[s] - 1 > ma) ma = d.smpAttempts[s] - 1;
  for (let i = 0; i < d.nSpans; i++) if (d.spanAttempt[i] > ma) ma = d.spanAttempt[i];
  for (let i = 0; i < d.nEvents; i++) if (d.evAttempt[i] > ma) ma = d.evAttempt[i];
  d.maxAttempt = ma;
}

/**
 * Name string of a name-table index.
 * @param {Data} d
 * @param {number} i
 */
export function nameOf(d, i) {
  const n = d.names[i];
  return n === undefined ? `name#${i}` : n === "" ? "(no name)" : n;
}

/**
 * Row label: "#<sample_index> | <source>", plus the rollout when several.
 * @param {Data} d
 * @param {number} s payload sample index
 */
export function sampleLabel(d, s) {
  const si = d.meta.samples.sample_index[s];
  const id = si === null || si === undefined ? `row ${d.meta.samples.row[s] ?? s}` : `#${si}`;
  const src = d.meta.sources[d.smpSource[s]];
  let out = src !== undefined && src !== "" ? `${id} | ${src}` : id;
  if (d.meta.rollouts.length > 1) {
    const r = d.meta.rollouts[d.smpRollout[s]];
    if (r !== undefined) out += ` | ${r}`;
  }
  return out;
}

/**
 * Status string of a sample.
 * @param {Data} d
 * @param {number} s
 */
export function statusOf(d, s) {
  return d.meta.statuses[d.smpStatus[s]] ?? "";
}

/**
 * Source string of a sample.
 * @param {Data} d
 * @param {number} s
 */
export function sourceOf(d, s) {
  return d.meta.sources[d.smpSource[s]] ?? "";
}

/**
 * Sample row id (frames.samples row) of a payload sample.
 * @param {Data} d
 * @param {number} s
 */
export function sampleRowId(d, s) {
  const r = d.meta.samples.row[s];
  return typeof r === "number" ? r : s;
}

/**
 * The PD-detail span (F_PD_DETAIL) a segment stands for: same sample, a name
 * that ends with the segment's name, and the closest interval. Falls back to
 * the virtual span. Computed on demand (hover and click only).
 * @param {Data} d
 * @param {number} seg
 * @returns {number} span index
 */
export function detailSpanForSegment(d, seg) {
  const v = d.segSpan[seg];
  if (v >= d.nSpans) return -1;
  const s = d.spanSample[v];
  const segName = nameOf(d, d.segName[seg]).toLowerCase();
  const a = d.segStart[seg];
  const b = d.segEnd[seg];
  const tol = Math.max(2e-3, (b - a) * 0.05);
  let best = -1;
  let bestErr = Infinity;
  for (let i = d.spanOff[s]; i < d.spanOff[s + 1]; i++) {
    if (!(d.spanFlags[i] & F_PD_DETAIL)) continue;
    const err = Math.abs(d.spanStart[i] - a) + Math.abs(d.spanEnd[i] - b);
    if (err > tol * 2 || err >= bestErr) continue;
    const nm = nameOf(d, d.spanName[i]).toLowerCase();
    if (!(nm.endsWith(segName) || segName.endsWith(nm.replace(/^sglang_pd_/, "")))) continue;
    best = i;
    bestErr = err;
  }
  return best >= 0 ? best : v;
}
