// Payload (docs/payload.md) -> typed columns plus derived per-sample and
// per-lane index ranges used by layout, level of detail and hit testing.

import { CTORS, toTyped } from "./bytes.js";
import { deriveEngine } from "./engine_lanes.js";
import { decodeLoad } from "./load_tracks.js";
import { hasFates, FATE_NONE } from "./fates.js";
import { warnOfOtherVersion } from "./version.js";
import { CODE_TABLES, PD_ROLE_MARKS, SAMPLE_STRINGS, normaliseMeta } from "./meta.js";
import { bidiIsolated } from "../util/text.js";
import CONTRACT from "../../../slime_trace_widget/view/payload_contract.json" with { type: "json" };
import VOCABULARIES from "../../../slime_trace_widget/vocabularies.json" with { type: "json" };

export { CTORS, toTyped, CODE_TABLES, PD_ROLE_MARKS, SAMPLE_STRINGS };

/** @typedef {import("./meta.js").Meta} Meta */

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
export const CLIP_REASONS = ["", ...VOCABULARIES.clip_reasons.map((reason) => reason.replace(/_/g, " "))];

/** Lane kinds (bits of Data.laneKind). */
export const LK_SPANS = CONTRACT.lane_kinds.spans;
export const LK_VIRTUAL = CONTRACT.lane_kinds.virtual;
export const LK_DETAIL = CONTRACT.lane_kinds.detail;

/** Event kinds (ev_kind codes). */
export const EV_INSTANT = VOCABULARIES.event_kinds.indexOf("instant");
export const EV_UNMATCHED = VOCABULARIES.event_kinds.indexOf("unmatched_end");

/** Link kinds, as `link_kind` codes index them (vocabularies.json). */
export const LINK_KINDS = /** @type {string[]} */ (VOCABULARIES.link_kinds);

/** PD phase of a virtual span. */
export const PD_NONE = CONTRACT.pd_phases.none;
export const PD_PREFILL = CONTRACT.pd_phases.prefill;
export const PD_DECODE = CONTRACT.pd_phases.decode;
/**
 * How a virtual span's name ends in its decode lane (vocabularies.json), trimmed and
 * lower-cased: the builder writes " [D]" exactly; a bare "[D]" or "[d]" from another
 * producer counts too.
 */
const DECODE_MARK = VOCABULARIES.pd_lane_suffixes.decode.trim().toLowerCase();
/** What every real PD span's name begins with (schema.PD_SPAN_PREFIX). */
export const PD_SPAN_PREFIX = /** @type {string} */ (VOCABULARIES.pd_span_prefix);

/** @typedef {import("./bytes.js").Typed} Typed */
/** @typedef {import("./bytes.js").Dtype} Dtype */

/** Dtypes of the columns (the contract), used when meta.columns omits one. */
export const DEFAULT_DTYPES = /** @type {Record<string, Dtype>} */ (CONTRACT.columns);
/** The last attempt an item's packed attempt (`span_attempt`, `ev_attempt`) names: later attempts share it. */
export const LAST_PACKED_ATTEMPT = 2 ** (8 * CTORS[DEFAULT_DTYPES.span_attempt].BYTES_PER_ELEMENT) - 1;

/**
 * @typedef {Object} Data
 * @property {Meta} meta
 * @property {string[]} names
 * @property {number} nSamples
 * @property {number} nSpans
 * @property {number} nSegs
 * @property {number} nEvents
 * @property {Float64Array} smpStart seconds from t0 (minus smpOffset), as every time below
 * @property {Float64Array} smpEnd
 * @property {Float64Array} smpBase where the sample's item times count from (smp_base; 0 in a payload without it)
 * @property {Float64Array} smpReward
 * @property {Uint8Array} smpStatus
 * @property {Uint16Array} smpSource
 * @property {Uint16Array} smpRollout
 * @property {Uint16Array} smpAttempts
 * @property {Uint16Array} smpLanes
 * @property {Uint32Array} smpOpen
 * @property {Float64Array} smpOffset seconds the sample is drawn shifted by (align rollout)
 * @property {Uint8Array} smpFate index in fates.js FATES (FATE_NONE: none)
 * @property {boolean} hasFates some sample has a fate
 * @property {Uint32Array} spanSample
 * @property {Float64Array} spanStart seconds from t0 (its sample's base plus the payload's offset)
 * @property {Float64Array} spanEnd where the span is drawn to (never before its start)
 * @property {Float32Array} spanDur its recorded duration, s (NaN while open), as the kernel's query reads it
 * @property {Uint16Array} spanName
 * @property {Uint8Array} spanLane
 * @property {Uint8Array} spanDepth
 * @property {Uint8Array} spanFlags
 * @property {Uint8Array} spanAttempt
 * @property {Int32Array} spanParent
 * @property {Uint32Array} segSpan
 * @property {Float64Array} segStart
 * @property {Float64Array} segEnd
 * @property {Uint16Array} segName
 * @property {Uint32Array} evSample
 * @property {Float64Array} evTs
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
 * @property {Float64Array} spanEndMax running max of span end within its lane (for culling)
 * @property {Uint8Array} laneKind per lane slot: bit 0 drawable spans, bit 1 virtual PD spans, bit 2 PD-detail spans
 * @property {Uint32Array} segOrder segment indices grouped by virtual span, by start
 * @property {Uint32Array} spanSegOff segments of span i: segOrder[spanSegOff[i] .. spanSegOff[i+1])
 * @property {Uint8Array} spanPd PD phase of each span (virtual spans only)
 * @property {Uint8Array} spanHasChild bit 0: a drawn span of the sample's own (not PD detail, not the engine's) has this span as parent; bit 1: a virtual PD span does
 * @property {number} maxAttempt highest attempt an item can be filtered by (0-based): the highest seen, at most {@link LAST_PACKED_ATTEMPT}
 * @property {boolean} attemptsPastLast a sample had attempts past {@link LAST_PACKED_ATTEMPT}, whose items carry that one
 * @property {number} globalStart
 * @property {number} globalEnd
 * @property {number} timesStart the earliest of the payload's times (or 0 when it has none)
 * @property {number} timesEnd the latest of them: the dump lasts timesEnd - timesStart (0 for one instant), where globalStart/globalEnd are widened to have something to draw
 * @property {boolean} hasPd
 * @property {Uint8Array} spanBand engine band phase of each span, 1 + index in bandPhases (0: not in the band; engine_lanes.js)
 * @property {Uint8Array} laneMix per lane slot: LANE_OWN (the sample's own spans), LANE_BAND (engine spans of the band)
 * @property {Uint8Array} evEngine 1 for an event of an engine span (collapsed rows leave it out)
 * @property {string[]} bandPhases the band's phases, in drawing order (last on top)
 * @property {boolean} hasEngine the payload holds engine spans
 * @property {import("./load_tracks.js").Load} load the engines' load tracks
 * @property {Float32Array} [liveRunning] a live view's seconds each sample has been running (its duration once finished)
 */

/**
 * @param {Record<string, unknown>} buffers
 * @param {Record<string, string>} columns
 * @param {string} name
 * @param {number} length expected length (-1: take the buffer's length)
 * @param {number} [fill]
 */
function column(buffers, columns, name, length, fill = 0) {
  const dtype = /** @type {Dtype} */ (columns[name] || DEFAULT_DTYPES[name]);
  const raw = buffers[name];
  let arr = raw === undefined || raw === null ? null : toTyped(raw, dtype);
  if (length < 0) return arr || new CTORS[dtype](0);
  if (!arr || arr.length < length) {
    const Ctor = CTORS[dtype];
    const out = new Ctor(length);
    if (fill !== 0) out.fill(fill);
    if (arr) out.set(arr);
    arr = out;
  } else if (arr.length > length) {
    arr = arr.subarray(0, length);
  }
  return arr;
}

/**
 * A time column as float64 (a payload from before float64 sample times sends float32).
 * @param {Typed} values
 * @returns {Float64Array}
 */
function float64(values) {
  return values instanceof Float64Array ? values : Float64Array.from(values);
}

/**
 * Item times as seconds from t0: each offset (float32 seconds from its sample's base,
 * docs/payload.md) plus that base, in float64, so a sample far from t0 keeps its
 * items' precision. An item of no sample (`owners[i]` past the last) counts from 0.
 * @param {Typed} offsets
 * @param {ArrayLike<number>} owners payload sample of each item
 * @param {Float64Array} bases per sample (smp_base)
 * @returns {Float64Array}
 */
function itemTimes(offsets, owners, bases) {
  const out = new Float64Array(offsets.length);
  for (let i = 0; i < offsets.length; i++) {
    const owner = owners[i];
    out[i] = offsets[i] + (owner < bases.length ? bases[owner] : 0);
  }
  return out;
}

/**
 * The payload sample of each PD segment: its span's (past the last sample when its span is unknown).
 * @param {Typed} segSpan
 * @param {Typed} spanSample
 * @param {number} nSamples
 */
function segmentSamples(segSpan, spanSample, nSamples) {
  const out = new Uint32Array(segSpan.length);
  for (let i = 0; i < segSpan.length; i++) out[i] = segSpan[i] < spanSample.length ? spanSample[segSpan[i]] : nSamples;
  return out;
}

/**
 * Check that (key1, key2, time) is non-decreasing; returns true when sorted.
 * @param {ArrayLike<number>} key1
 * @param {ArrayLike<number>} key2
 * @param {ArrayLike<number>} time
 */
function isSorted(key1, key2, time) {
  for (let i = 1; i < key1.length; i++) {
    const delta1 = key1[i] - key1[i - 1];
    if (delta1 > 0) continue;
    if (delta1 < 0) return false;
    const delta2 = key2[i] - key2[i - 1];
    if (delta2 > 0) continue;
    if (delta2 < 0) return false;
    if (time[i] < time[i - 1]) return false;
  }
  return true;
}

/**
 * Decode a payload object into columns and derived ranges.
 * @param {any} payload `{version, meta, buffers}` (docs/payload.md)
 * @returns {Data}
 */
export function decodePayload(payload) {
  const payloadObject = payload && typeof payload === "object" ? payload : {};
  warnOfOtherVersion(payloadObject.version);
  const meta = normaliseMeta(payloadObject.meta);
  const buffers = /** @type {Record<string, unknown>} */ (payloadObject.buffers && typeof payloadObject.buffers === "object" ? payloadObject.buffers : {});
  const cols = meta.columns;

  const smpStartRaw = column(buffers, cols, "smp_start", -1);
  const nSamples = Math.max(meta.samples.row.length, smpStartRaw.length);
  if (meta.n_samples_total < 0) meta.n_samples_total = nSamples;
  const readColumn = (/** @type {string} */ name, /** @type {number} */ len, fill = 0) => column(buffers, cols, name, len, fill);

  const spanSampleRaw = readColumn("span_sample", -1);
  const nSpans = spanSampleRaw.length;
  const segSpanRaw = readColumn("seg_span", -1);
  const nSegs = segSpanRaw.length;
  const evSampleRaw = readColumn("ev_sample", -1);
  const nEvents = evSampleRaw.length;
  const linkKindRaw = readColumn("link_kind", -1);
  const nLinks = linkKindRaw.length;
  const smpBase = float64(readColumn("smp_base", nSamples));
  const segSample = segmentSamples(segSpanRaw, spanSampleRaw, nSamples);
  const times = (/** @type {string} */ name, /** @type {number} */ len, /** @type {ArrayLike<number>} */ owners) => itemTimes(readColumn(name, len, NaN), owners, smpBase);

  /** @type {Data} */
  const data = {
    meta,
    names: meta.names,
    nSamples,
    nSpans,
    nSegs,
    nEvents,
    smpStart: float64(readColumn("smp_start", nSamples, NaN)),
    smpEnd: float64(readColumn("smp_end", nSamples, NaN)),
    smpBase,
    smpReward: /** @type {Float64Array} */ (readColumn("smp_reward", nSamples, NaN)),
    smpStatus: /** @type {Uint8Array} */ (readColumn("smp_status", nSamples)),
    smpSource: /** @type {Uint16Array} */ (readColumn("smp_source", nSamples)),
    smpRollout: /** @type {Uint16Array} */ (readColumn("smp_rollout", nSamples)),
    smpAttempts: /** @type {Uint16Array} */ (readColumn("smp_attempts", nSamples)),
    smpLanes: /** @type {Uint16Array} */ (readColumn("smp_lanes", nSamples)),
    smpOpen: /** @type {Uint32Array} */ (readColumn("smp_open", nSamples)),
    smpOffset: float64(readColumn("smp_offset", nSamples)),
    smpFate: /** @type {Uint8Array} */ (readColumn("smp_fate", nSamples, FATE_NONE)),
    hasFates: false,
    spanSample: /** @type {Uint32Array} */ (spanSampleRaw),
    spanStart: times("span_start", nSpans, spanSampleRaw),
    spanEnd: times("span_end", nSpans, spanSampleRaw),
    spanDur: /** @type {Float32Array} */ (readColumn("span_dur", nSpans, NaN)),
    spanName: /** @type {Uint16Array} */ (readColumn("span_name", nSpans)),
    spanLane: /** @type {Uint8Array} */ (readColumn("span_lane", nSpans)),
    spanDepth: /** @type {Uint8Array} */ (readColumn("span_depth", nSpans)),
    spanFlags: /** @type {Uint8Array} */ (readColumn("span_flags", nSpans)),
    spanAttempt: /** @type {Uint8Array} */ (readColumn("span_attempt", nSpans)),
    spanParent: /** @type {Int32Array} */ (readColumn("span_parent", nSpans, -1)),
    segSpan: /** @type {Uint32Array} */ (segSpanRaw),
    segStart: times("seg_start", nSegs, segSample),
    segEnd: times("seg_end", nSegs, segSample),
    segName: /** @type {Uint16Array} */ (readColumn("seg_name", nSegs)),
    evSample: /** @type {Uint32Array} */ (evSampleRaw),
    evTs: times("ev_ts", nEvents, evSampleRaw),
    evName: /** @type {Uint16Array} */ (readColumn("ev_name", nEvents)),
    evLane: /** @type {Uint8Array} */ (readColumn("ev_lane", nEvents)),
    evKind: /** @type {Uint8Array} */ (readColumn("ev_kind", nEvents)),
    evAttempt: /** @type {Uint8Array} */ (readColumn("ev_attempt", nEvents)),
    evParent: /** @type {Int32Array} */ (readColumn("ev_parent", nEvents, -1)),
    nLinks,
    linkKind: /** @type {Uint8Array} */ (linkKindRaw),
    // A missing endpoint reads as an event past the last one: js/src/data/links.js drops it.
    linkFrom: /** @type {Int32Array} */ (readColumn("link_from", nLinks, -0x80000000)),
    linkTo: /** @type {Int32Array} */ (readColumn("link_to", nLinks, -0x80000000)),
    spanOff: new Uint32Array(nSamples + 1),
    evOff: new Uint32Array(nSamples + 1),
    nLanes: new Uint16Array(nSamples),
    laneBase: new Uint32Array(nSamples + 1),
    laneSpanOff: new Uint32Array(1),
    laneEvOff: new Uint32Array(1),
    spanEndMax: new Float64Array(nSpans),
    laneKind: new Uint8Array(0),
    segOrder: new Uint32Array(nSegs),
    spanSegOff: new Uint32Array(nSpans + 1),
    spanPd: new Uint8Array(nSpans),
    spanHasChild: new Uint8Array(nSpans),
    maxAttempt: 0,
    attemptsPastLast: false,
    globalStart: 0,
    globalEnd: 1,
    timesStart: 0,
    timesEnd: 0,
    hasPd: false,
    spanBand: new Uint8Array(nSpans),
    laneMix: new Uint8Array(0),
    evEngine: new Uint8Array(nEvents),
    bandPhases: [],
    hasEngine: false,
    load: decodeLoad(buffers, cols, meta.load_engines),
  };

  // Out-of-range sample references would corrupt every range below: drop them
  // by clamping to a sentinel past the last sample (they are then never drawn).
  for (let i = 0; i < nSpans; i++) if (data.spanSample[i] >= nSamples) data.spanSample[i] = nSamples;
  for (let i = 0; i < nEvents; i++) if (data.evSample[i] >= nSamples) data.evSample[i] = nSamples;

  warnIfUnsorted(data);
  deriveRanges(data);
  deriveSegments(data);
  deriveGlobals(data);
  deriveEngine(data);
  data.hasFates = hasFates(data.smpFate);
  return data;
}

/**
 * The contract sorts spans by (sample, lane, start) and events by
 * (sample, lane, ts), and the encoder checks it (payload.py); the binary
 * searches here rely on it. Another producer that breaks it gets a warning.
 * @param {Data} data
 */
function warnIfUnsorted(data) {
  if (!isSorted(data.spanSample, data.spanLane, data.spanStart)) {
    console.warn("slime-trace-widget: spans not sorted by (sample, lane, start); some may not be drawn or picked");
  }
  if (!isSorted(data.evSample, data.evLane, data.evTs)) {
    console.warn("slime-trace-widget: events not sorted by (sample, lane, ts); some may not be drawn or picked");
  }
}

/**
 * Per-sample and per-lane CSR offsets, lane counts, running max of ends.
 * @param {Data} data
 */
function deriveRanges(data) {
  const { nSamples, nSpans, nEvents } = data;
  // Per-sample offsets (inputs are sorted by sample).
  const spanCount = new Uint32Array(nSamples + 1);
  for (let i = 0; i < nSpans; i++) spanCount[data.spanSample[i]]++;
  for (let sample = 0; sample < nSamples; sample++) data.spanOff[sample + 1] = data.spanOff[sample] + spanCount[sample];
  const evCount = new Uint32Array(nSamples + 1);
  for (let i = 0; i < nEvents; i++) evCount[data.evSample[i]]++;
  for (let sample = 0; sample < nSamples; sample++) data.evOff[sample + 1] = data.evOff[sample] + evCount[sample];

  // Lanes: at least what the sample says, at least what its spans and events use.
  for (let sample = 0; sample < nSamples; sample++) {
    let lanes = data.smpLanes[sample];
    for (let i = data.spanOff[sample]; i < data.spanOff[sample + 1]; i++) if (data.spanLane[i] + 1 > lanes) lanes = data.spanLane[i] + 1;
    for (let i = data.evOff[sample]; i < data.evOff[sample + 1]; i++) if (data.evLane[i] + 1 > lanes) lanes = data.evLane[i] + 1;
    data.nLanes[sample] = lanes;
    data.laneBase[sample + 1] = data.laneBase[sample] + lanes;
  }
  const slots = data.laneBase[nSamples];
  data.laneSpanOff = new Uint32Array(slots + 1);
  data.laneEvOff = new Uint32Array(slots + 1);
  for (let sample = 0; sample < nSamples; sample++) {
    const base = data.laneBase[sample];
    const nl = data.nLanes[sample];
    // Count per lane, then prefix-sum from the sample's first span.
    const lo = data.spanOff[sample];
    const hi = data.spanOff[sample + 1];
    let i = lo;
    for (let lane = 0; lane < nl; lane++) {
      data.laneSpanOff[base + lane] = i;
      while (i < hi && data.spanLane[i] === lane) i++;
    }
    const elo = data.evOff[sample];
    const ehi = data.evOff[sample + 1];
    let j = elo;
    for (let lane = 0; lane < nl; lane++) {
      data.laneEvOff[base + lane] = j;
      while (j < ehi && data.evLane[j] === lane) j++;
    }
  }
  for (let i = 0; i < nSpans; i++) {
    const parent = data.spanParent[i];
    if (parent < 0 || parent >= nSpans) continue;
    const fl = data.spanFlags[i];
    if (fl & F_VIRTUAL) data.spanHasChild[parent] |= 2;
    else if (!(fl & (F_PD_DETAIL | F_ENGINE))) data.spanHasChild[parent] |= 1;
  }
  data.laneSpanOff[slots] = nSpans;
  data.laneEvOff[slots] = nEvents;
  // Samples past the last (the out-of-range sentinel) keep their items out of every lane.
  if (nSamples > 0) {
    data.laneSpanOff[slots] = data.spanOff[nSamples];
    data.laneEvOff[slots] = data.evOff[nSamples];
  }

  // Running max of end within each lane: with starts sorted, the first span
  // that can reach time t is the first whose running max end >= t.
  const em = data.spanEndMax;
  data.laneKind = new Uint8Array(slots);
  for (let slot = 0; slot < slots; slot++) {
    let maxEnd = -Infinity;
    let kind = 0;
    for (let i = data.laneSpanOff[slot]; i < data.laneSpanOff[slot + 1]; i++) {
      const fl = data.spanFlags[i];
      kind |= fl & F_VIRTUAL ? LK_VIRTUAL : fl & F_PD_DETAIL ? LK_DETAIL : LK_SPANS;
      let end = data.spanEnd[i];
      if (!(end >= data.spanStart[i])) end = data.spanStart[i];
      if (end > maxEnd) maxEnd = end;
      em[i] = maxEnd;
    }
    data.laneKind[slot] = kind;
  }
}

/**
 * Segments grouped by virtual span; PD phase of virtual spans.
 * @param {Data} data
 */
function deriveSegments(data) {
  const { nSpans, nSegs } = data;
  const count = new Uint32Array(nSpans + 1);
  for (let i = 0; i < nSegs; i++) if (data.segSpan[i] < nSpans) count[data.segSpan[i]]++;
  for (let i = 0; i < nSpans; i++) data.spanSegOff[i + 1] = data.spanSegOff[i] + count[i];
  const fill = data.spanSegOff.slice(0, nSpans);
  let placed = 0;
  for (let i = 0; i < nSegs; i++) {
    const sp = data.segSpan[i];
    if (sp < nSpans) {
      data.segOrder[fill[sp]++] = i;
      placed++;
    }
  }
  if (placed < nSegs) data.segOrder = data.segOrder.subarray(0, placed);
  // Order each span's segments by start (usually already in order).
  for (let sp = 0; sp < nSpans; sp++) {
    const lo = data.spanSegOff[sp];
    const hi = data.spanSegOff[sp + 1];
    if (hi - lo < 2) continue;
    let sorted = true;
    for (let position = lo + 1; position < hi; position++) if (data.segStart[data.segOrder[position]] < data.segStart[data.segOrder[position - 1]]) sorted = false;
    if (!sorted) {
      const part = Array.from(data.segOrder.subarray(lo, hi)).sort((left, right) => data.segStart[left] - data.segStart[right]);
      data.segOrder.set(part, lo);
    }
  }
  const cache = new Map();
  for (let i = 0; i < nSpans; i++) {
    if (!(data.spanFlags[i] & F_VIRTUAL)) continue;
    data.hasPd = true;
    const nm = data.spanName[i];
    let ph = cache.get(nm);
    if (ph === undefined) {
      // the lane suffix the builder gave it; a name's other words say nothing
      const name = (data.names[nm] || "").toLowerCase();
      ph = name.endsWith(DECODE_MARK) ? PD_DECODE : PD_PREFILL;
      cache.set(nm, ph);
    }
    data.spanPd[i] = ph;
  }
}

/**
 * Global time range and highest attempt.
 * @param {Data} data
 */
function deriveGlobals(data) {
  let lo = Infinity;
  let hi = -Infinity;
  for (let sample = 0; sample < data.nSamples; sample++) {
    const start = data.smpStart[sample];
    const end = data.smpEnd[sample];
    if (start < lo) lo = start;
    if (end > hi) hi = end;
    if (start > hi) hi = start;
  }
  if (!(lo <= hi)) {
    for (let i = 0; i < data.nSpans; i++) {
      if (data.spanStart[i] < lo) lo = data.spanStart[i];
      if (data.spanEnd[i] > hi) hi = data.spanEnd[i];
    }
    for (let i = 0; i < data.nEvents; i++) {
      if (data.evTs[i] < lo) lo = data.evTs[i];
      if (data.evTs[i] > hi) hi = data.evTs[i];
    }
  }
  data.timesStart = lo <= hi ? lo : 0;
  data.timesEnd = lo <= hi ? hi : Math.max(0, data.meta.t1 - data.meta.t0) || 0;
  if (!(lo <= hi)) {
    lo = 0;
    hi = Math.max(1, data.meta.t1 - data.meta.t0);
  }
  if (hi - lo < 1e-6) {
    lo -= 0.5;
    hi += 0.5;
  }
  data.globalStart = lo;
  data.globalEnd = hi;
  let ma = 0;
  for (let sample = 0; sample < data.nSamples; sample++) if (data.smpAttempts[sample] - 1 > ma) ma = data.smpAttempts[sample] - 1;
  for (let i = 0; i < data.nSpans; i++) if (data.spanAttempt[i] > ma) ma = data.spanAttempt[i];
  for (let i = 0; i < data.nEvents; i++) if (data.evAttempt[i] > ma) ma = data.evAttempt[i];
  data.maxAttempt = Math.min(ma, LAST_PACKED_ATTEMPT);
  data.attemptsPastLast = ma > LAST_PACKED_ATTEMPT;
}

/**
 * Name string of a name-table index.
 * @param {Data} data
 * @param {number} nameIndex
 */
export function nameOf(data, nameIndex) {
  const name = data.names[nameIndex];
  return name === undefined ? `name#${nameIndex}` : name === "" ? "(no name)" : name;
}

/**
 * Row label: "#<sample_index> | <source>", plus the rollout when several.
 * @param {Data} data
 * @param {number} sample payload sample index
 */
export function sampleLabel(data, sample) {
  const si = data.meta.samples.sample_index[sample];
  const id = si === null || si === undefined ? `row ${data.meta.samples.row[sample] ?? sample}` : `#${si}`;
  const src = data.meta.sources[data.smpSource[sample]];
  let out = src !== undefined && src !== "" ? `${id} | ${bidiIsolated(src)}` : id;
  if (data.meta.rollouts.length > 1) {
    const rollout = data.meta.rollouts[data.smpRollout[sample]];
    if (rollout !== undefined) out += ` | ${bidiIsolated(rollout)}`;
  }
  return out;
}

/**
 * Status string of a sample.
 * @param {Data} data
 * @param {number} sample
 */
export function statusOf(data, sample) {
  return data.meta.statuses[data.smpStatus[sample]] ?? "";
}

/**
 * Source string of a sample.
 * @param {Data} data
 * @param {number} sample
 */
export function sourceOf(data, sample) {
  return data.meta.sources[data.smpSource[sample]] ?? "";
}

/**
 * Sample row id (frames.samples row) of a payload sample.
 * @param {Data} data
 * @param {number} sample
 */
export function sampleRowId(data, sample) {
  const row = data.meta.samples.row[sample];
  return typeof row === "number" ? row : sample;
}

/**
 * The PD-detail span (F_PD_DETAIL) a segment stands for: same sample, a name
 * that ends with the segment's name, and the closest interval. Falls back to
 * the virtual span. Computed on demand (hover and click only).
 * @param {Data} data
 * @param {number} seg
 * @returns {number} span index
 */
export function detailSpanForSegment(data, seg) {
  const virtualSpan = data.segSpan[seg];
  if (virtualSpan >= data.nSpans) return -1;
  const sample = data.spanSample[virtualSpan];
  const segName = nameOf(data, data.segName[seg]).toLowerCase();
  const start = data.segStart[seg];
  const end = data.segEnd[seg];
  const tol = Math.max(2e-3, (end - start) * 0.05);
  let best = -1;
  let bestErr = Infinity;
  for (let i = data.spanOff[sample]; i < data.spanOff[sample + 1]; i++) {
    if (!(data.spanFlags[i] & F_PD_DETAIL)) continue;
    const err = Math.abs(data.spanStart[i] - start) + Math.abs(data.spanEnd[i] - end);
    if (err > tol * 2 || err >= bestErr) continue;
    const nm = nameOf(data, data.spanName[i]).toLowerCase();
    if (!(nm.endsWith(segName) || segName.endsWith(nm.startsWith(PD_SPAN_PREFIX) ? nm.slice(PD_SPAN_PREFIX.length) : nm))) continue;
    best = i;
    bestErr = err;
  }
  return best >= 0 ? best : virtualSpan;
}
