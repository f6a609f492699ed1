// Engine phases of a generation: where its time went inside SGLang (queue,
// prefill, decode, PD steps), from the engine spans the kernel joined under it
// (flag F_ENGINE), by the rule of answers/engine.py (`phase_seconds`, what
// `analysis.engine_breakdown` gives per sample): the phases partition wall time.
// Every instant in which some engine slice of the generation's requests runs
// (within the generation) counts once, in one phase:
//
// 1. Nesting first: a slice's own time is its interval less its child slices'
//    (a child's time is the child's, whatever its phase). The unsliced wait after
//    a `retract` event, from the event to the next child slice of the slice that
//    holds it, counts as queue.
// 2. Where own times of several slices overlap (the two halves of a PD request,
//    the tokenizer beside the scheduler), the instant counts in the first phase
//    of PRIORITY (vocabularies.json, read by the kernel and the engine band too).
// 3. Request spans and KV sender spans hold slices and count no time of their own.
//
// A slice's phase is the one whose names list it in `meta.engine_phases` (the
// kernel's one table, answers/engine.py PHASES), else "other".

import { F_ENGINE, nameOf } from "./decode.js";
import { OTHER, PRIORITY, isHolderSpan, isRequestSpan, phasePriority } from "./engine_lanes.js";

/** @typedef {import("./decode.js").Data} Data */
/** @typedef {{phase: string, dur: number}} EnginePhase */

export { PRIORITY };
/** The engine's event that puts a request back in the queue (answers/engine.py RETRACT_EVENT). */
export const RETRACT_EVENT = "retract";
const QUEUE = "queue";

/**
 * Seconds per engine phase of `span`: a generation span (its requests) or an
 * engine request span (itself), as a partition of the wall time their slices
 * cover within the span the requests hang under. Phases in the payload's order,
 * then "other"; empty when the span has no engine request.
 * @param {Data} data
 * @param {number} span internal index
 * @returns {EnginePhase[]}
 */
export function enginePhases(data, span) {
  if (!(span >= 0 && span < data.nSpans)) return [];
  const sample = data.spanSample[span];
  const first = data.spanOff[sample];
  const last = data.spanOff[sample + 1];
  /** @type {number[]} */
  const requests = [];
  if (data.spanFlags[span] & F_ENGINE) {
    if (!isRequestSpan(data, span)) return [];
    requests.push(span);
  } else {
    for (let i = first; i < last; i++) {
      if (data.spanParent[i] === span && data.spanFlags[i] & F_ENGINE) requests.push(i);
    }
  }
  if (requests.length === 0) return [];
  const named = Object.keys(data.meta.engine_phases);
  const order = phasePriority(named);
  const codes = { ofName: phaseCodes(data.meta.engine_phases, order), queue: order.indexOf(QUEUE), other: order.length - 1 };
  const slices = slicesOf(data, requests, codes);
  const seconds = partition(ownIntervals(slices), order.length);
  /** @type {Map<string, number>} */
  const out = new Map([...named, OTHER].map((phase) => [phase, 0]));
  order.forEach((phase, code) => out.set(phase, (out.get(phase) ?? 0) + seconds[code]));
  return [...out].map(([phase, dur]) => ({ phase, dur })).filter((row) => row.dur > 0);
}

/**
 * The spans whose attributes compare the engine's figures with slime's for a
 * selected span: a generation and its engine request spans (a generation
 * selected, or one of its requests). Null when the span has no engine request.
 * @param {Data} data
 * @param {number} span internal index
 * @returns {{generation: number, requests: number[]}|null}
 */
export function figureSpans(data, span) {
  if (span < 0 || span >= data.nSpans) return null;
  if (data.spanFlags[span] & F_ENGINE) {
    if (!isRequestSpan(data, span)) return null;
    const parent = data.spanParent[span];
    return { generation: parent >= 0 && parent < data.nSpans ? parent : -1, requests: [span] };
  }
  /** @type {number[]} */
  const requests = [];
  for (let i = data.spanOff[data.spanSample[span]]; i < data.spanOff[data.spanSample[span] + 1]; i++) {
    if (data.spanParent[i] === span && data.spanFlags[i] & F_ENGINE) requests.push(i);
  }
  return requests.length ? { generation: span, requests } : null;
}

/**
 * Slice name -> phase code (index in `order`); a name two phases list is the first's.
 * @param {Record<string, string[]>} phases
 * @param {string[]} order
 * @returns {Map<string, number>}
 */
function phaseCodes(phases, order) {
  /** @type {Map<string, number>} */
  const out = new Map();
  for (const [phase, names] of Object.entries(phases)) {
    for (const name of names) if (!out.has(name)) out.set(name, order.indexOf(phase));
  }
  return out;
}

/**
 * @typedef {Object} Slices
 * @property {number[]} start
 * @property {number[]} end
 * @property {number[]} code phase code
 * @property {number[]} parent index of the slice it nests in, -1 none
 * @property {number[]} low its window: the span outside the engine its request hangs under
 * @property {number[]} high
 */

/**
 * The slices under `requests` (their engine spans but holders), each with its
 * phase, the slice it nests in and its window; then the unsliced wait after each
 * retraction, as a queue slice in the slice it interrupted.
 * @param {Data} data
 * @param {number[]} requests of one sample
 * @param {{ofName: Map<string, number>, queue: number, other: number}} codes phase code of
 *   each slice name, of the queue and of "other" (names not listed)
 * @returns {Slices}
 */
function slicesOf(data, requests, codes) {
  const sample = data.spanSample[requests[0]];
  const first = data.spanOff[sample];
  const last = data.spanOff[sample + 1];
  /** @type {Map<number, number[]>} */
  const children = new Map();
  for (let i = first; i < last; i++) {
    const parent = data.spanParent[i];
    if (!(data.spanFlags[i] & F_ENGINE) || parent < first || parent >= last) continue;
    const list = children.get(parent);
    if (list) list.push(i);
    else children.set(parent, [i]);
  }
  /** @type {Slices} */
  const out = { start: [], end: [], code: [], parent: [], low: [], high: [] };
  /** @type {Map<number, number>} span -> slice */
  const sliceOf = new Map();
  const seen = new Set(requests);
  for (const request of requests) {
    const [low, high] = windowOf(data, request);
    const stack = [request];
    while (stack.length) {
      const holder = /** @type {number} */ (stack.pop());
      for (const child of children.get(holder) ?? []) {
        if (seen.has(child)) continue; // a cycle in a hostile payload
        seen.add(child);
        stack.push(child);
        if (isHolderSpan(data, child)) continue;
        sliceOf.set(child, out.start.length);
        out.start.push(data.spanStart[child]);
        out.end.push(data.spanEnd[child]);
        out.code.push(codes.ofName.get(nameOf(data, data.spanName[child])) ?? codes.other);
        out.parent.push(-1);
        out.low.push(low);
        out.high.push(high);
      }
    }
  }
  for (const [span, slice] of sliceOf) out.parent[slice] = sliceOf.get(data.spanParent[span]) ?? -1;
  for (const wait of requeueWaits(data, out, sliceOf, sample)) {
    out.start.push(wait.start);
    out.end.push(wait.end);
    out.code.push(codes.queue);
    out.parent.push(wait.slice);
    out.low.push(out.low[wait.slice]);
    out.high.push(out.high[wait.slice]);
  }
  return out;
}

/**
 * The window of a request's slices: the span outside the engine it hangs under
 * (its start, and its end when known), else no bound.
 * @param {Data} data
 * @param {number} request
 * @returns {[number, number]}
 */
function windowOf(data, request) {
  const owner = data.spanParent[request];
  if (!(owner >= 0 && owner < data.nSpans) || data.spanFlags[owner] & F_ENGINE) return [-Infinity, Infinity];
  const start = data.spanStart[owner];
  const end = data.spanEnd[owner];
  return [Number.isNaN(start) ? -Infinity : start, Number.isFinite(end) ? end : Infinity];
}

/**
 * SGLang writes no slice for the wait of a retracted request until it runs again:
 * it lies inside the slice the request was put back from, from the `retract` event
 * to that slice's next child. Each such wait with the slice it lies in.
 * @param {Data} data
 * @param {Slices} slices
 * @param {Map<number, number>} sliceOf span -> slice
 * @param {number} sample
 * @returns {{start: number, end: number, slice: number}[]}
 */
function requeueWaits(data, slices, sliceOf, sample) {
  /** @type {{start: number, end: number, slice: number}[]} */
  const out = [];
  const retract = data.names.indexOf(RETRACT_EVENT);
  if (retract < 0) return out;
  for (let ev = data.evOff[sample]; ev < data.evOff[sample + 1]; ev++) {
    if (data.evName[ev] !== retract) continue;
    const slice = sliceOf.get(data.evParent[ev]);
    const ts = data.evTs[ev];
    if (slice === undefined || !Number.isFinite(ts)) continue;
    let next = Infinity;
    for (let child = 0; child < slices.start.length; child++) {
      const start = slices.start[child];
      if (slices.parent[child] === slice && start >= ts && start < next) next = start;
    }
    if (next < Infinity) out.push({ start: ts, end: next, slice });
  }
  return out;
}

/** @typedef {{start: number, end: number, code: number}} Piece */

/**
 * Each slice's own time as pieces: its interval less the union of its child
 * slices' (each clipped to it), clipped to its window. A slice whose start or end
 * is unknown has none, and its children nest in nothing.
 * @param {Slices} slices
 * @returns {Piece[]}
 */
function ownIntervals(slices) {
  const { start, end, low, high } = slices;
  const n = start.length;
  const finite = (/** @type {number} */ i) => Number.isFinite(start[i]) && Number.isFinite(end[i]);
  /** @type {[number, number][][]} */
  const inner = Array.from({ length: n }, () => []);
  for (let i = 0; i < n; i++) {
    const parent = slices.parent[i];
    if (parent < 0 || !finite(i) || !finite(parent)) continue;
    const from = Math.max(start[i], start[parent]);
    const to = Math.min(end[i], end[parent]);
    if (to > from) inner[parent].push([from, to]);
  }
  /** @type {Piece[]} */
  const out = [];
  for (let i = 0; i < n; i++) {
    if (!finite(i)) continue;
    const add = (/** @type {number} */ from, /** @type {number} */ to) => {
      const clippedFrom = Math.max(from, low[i]);
      const clippedTo = Math.min(to, high[i]);
      if (clippedTo > clippedFrom) out.push({ start: clippedFrom, end: clippedTo, code: slices.code[i] });
    };
    let from = start[i];
    for (const [childFrom, childTo] of inner[i].sort((a, b) => a[0] - b[0])) {
      if (childFrom > from) add(from, childFrom);
      from = Math.max(from, childTo);
    }
    add(from, end[i]);
  }
  return out;
}

/**
 * Seconds per phase code of the union of the pieces: each instant counted once,
 * in the lowest code among the pieces holding it.
 * @param {Piece[]} pieces
 * @param {number} nCodes
 * @returns {Float64Array}
 */
function partition(pieces, nCodes) {
  /** @type {[number, number, number][]} time, +1 start / -1 end, code */
  const points = [];
  for (const piece of pieces) points.push([piece.start, 1, piece.code], [piece.end, -1, piece.code]);
  points.sort((a, b) => a[0] - b[0]);
  const running = new Int32Array(nCodes);
  const out = new Float64Array(nCodes);
  for (let k = 0; k < points.length; k++) {
    running[points[k][2]] += points[k][1];
    const length = k + 1 < points.length ? points[k + 1][0] - points[k][0] : 0;
    if (!(length > 0)) continue;
    const code = running.findIndex((count) => count > 0);
    if (code >= 0) out[code] += length;
  }
  return out;
}
