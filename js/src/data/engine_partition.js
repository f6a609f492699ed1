// The engine phases' partition of wall time, as pieces: the one rule of
// answers/engine.py (`phase_seconds`, what `analysis.engine_breakdown` counts per
// sample), which the details panel sums (data/engine.js) and the engine band of a
// collapsed row draws (render/band.js), so the picture is the figures. Every instant
// in which some engine slice of the requests runs (within the span each request
// hangs under; an open one's end is unknown, so only its start clips) is in one
// piece, of one phase:
//
// 1. Nesting first: a slice's own time is its interval less its child slices' (a
//    child's time is the child's, whatever its phase). The unsliced wait after a
//    `retract` event, from the event to the next child slice of the slice that holds
//    it, counts as queue.
// 2. Where own times of several slices overlap (the two halves of a PD request, the
//    tokenizer beside the scheduler), the instant is the first phase of the priority
//    (vocabularies.json engine_phase_priority, read by the kernel too).
// 3. Request spans and KV sender spans hold slices and have no time of their own: a
//    request's time that none of its slices covers is in no piece (no phase, nothing
//    drawn).
//
// A slice's phase is its band code (`data.spanBand`, engine_lanes.js: the phase whose
// names list it in `meta.engine_phases`, else "other"); a higher code comes first in
// the priority.
//
// The figures count every slice. The band draws what the filters leave
// (`shownPieces`): the same rules over the slices drawn bright, and where none of
// those runs, over the slices drawn at all, faint; a hidden slice is as if absent.
// A holder's time being its slices', a holder drawn with none of its slices drawn
// (a query that keeps requests, not their slices) stands for them: they count as
// drawn as the holder is.

import { F_ENGINE, F_OPEN } from "./decode.js";
import { isHolderSpan, isRequestSpan } from "./engine_lanes.js";
import { SHOWN } from "./filters.js";

/** @typedef {import("./decode.js").Data} Data */

/** The engine's event that puts a request back in the queue (answers/engine.py RETRACT_EVENT). */
export const RETRACT_EVENT = "retract";
const QUEUE = "queue";
const OTHER_CODE = 1;

/**
 * Disjoint pieces in time order, each of one phase: what each instant counts in.
 * @typedef {Object} PhasePieces
 * @property {Float64Array} start
 * @property {Float64Array} end
 * @property {Uint8Array} code band code (1 + index in `data.bandPhases`)
 * @property {number} n
 */

/**
 * Pieces as the band draws them: disjoint, in time order, each bright or faint.
 * @typedef {PhasePieces & {dim: Uint8Array}} BandPieces
 */

/**
 * The partition of the time the slices under `requests` cover, as pieces.
 * @param {Data} data
 * @param {number[]} requests request spans of one sample
 * @returns {PhasePieces}
 */
export function phasePieces(data, requests) {
  if (!requests.length) return emptyPieces();
  return piecesOf(slicesOf(data, requests), null);
}

/** @typedef {{slices: Slices, pieces: PhasePieces}} SamplePartition */

/** @type {WeakMap<Data, (SamplePartition|undefined)[]>} */
const SAMPLE_PARTITIONS = new WeakMap();

/**
 * The slices of all the engine requests of `sample` and their pieces (what
 * engine_breakdown counts for it), made when first asked for and kept with the data:
 * the band asks every time the filters change.
 * @param {Data} data
 * @param {number} sample
 * @returns {SamplePartition}
 */
function samplePartition(data, sample) {
  let cache = SAMPLE_PARTITIONS.get(data);
  if (!cache) SAMPLE_PARTITIONS.set(data, (cache = new Array(data.nSamples)));
  let made = cache[sample];
  if (!made) {
    /** @type {number[]} */
    const requests = [];
    if (data.hasEngine && sample >= 0 && sample < data.nSamples) {
      for (let i = data.spanOff[sample]; i < data.spanOff[sample + 1]; i++) if (isRequestSpan(data, i)) requests.push(i);
    }
    const slices = requests.length ? slicesOf(data, requests) : emptySlices();
    made = { slices, pieces: piecesOf(slices, null) };
    cache[sample] = made;
  }
  return made;
}

/**
 * The pieces of all the engine requests of `sample`, every slice counted (kept with
 * the data).
 * @param {Data} data
 * @param {number} sample
 * @returns {PhasePieces}
 */
export function samplePieces(data, sample) {
  return samplePartition(data, sample).pieces;
}

/**
 * What the band of `sample` shows under the spans' visibility `vis` (0 hidden, 1
 * shown, 2 dimmed; a retraction's wait has its slice's; a hidden slice under a drawn
 * holder none of whose slices is drawn has the holder's, `sliceVisibility`): each
 * instant in the phase the rules give over the shown slices, bright; where no shown
 * slice runs, the phase they give over the dimmed ones, faint; where neither runs,
 * nothing. Nesting too is among those slices: a slice's own time gets back a hidden
 * child's. All shown is `samplePieces`, bright, and costs one pass over the slices.
 * @param {Data} data
 * @param {number} sample
 * @param {Uint8Array} vis
 * @returns {BandPieces}
 */
export function shownPieces(data, sample, vis) {
  const { slices, pieces } = samplePartition(data, sample);
  const n = slices.span.length;
  const shown = sliceVisibility(slices, vis);
  const bright = new Uint8Array(n);
  const drawn = new Uint8Array(n);
  let nBright = 0;
  let nDrawn = 0;
  for (let i = 0; i < n; i++) {
    const visibility = shown[i];
    if (visibility) {
      drawn[i] = 1;
      nDrawn++;
    }
    if (visibility === SHOWN) {
      bright[i] = 1;
      nBright++;
    }
  }
  if (nBright === n) return withDim(pieces, 0);
  if (nDrawn === n && !nBright) return withDim(pieces, 1);
  const front = nBright ? piecesOf(slices, bright) : emptyPieces();
  if (nBright === nDrawn) return withDim(front, 0);
  return overlay(front, piecesOf(slices, drawn));
}

/**
 * Each slice's visibility in the band: its span's under `vis`; a hidden one takes
 * that of its nearest holder (request or KV sender) drawn with none of its slices
 * drawn, as a holder's time is its slices'. So a query that keeps requests and not
 * their slices shows the requests' time, in the phases the figures count, while one
 * that hides some slices of a request and shows others (`-name:prefill_forward`)
 * gives the hidden ones' time to the shown ones, as when no holder is kept.
 * @param {Slices} slices
 * @param {Uint8Array} vis
 * @returns {Uint8Array}
 */
function sliceVisibility(slices, vis) {
  const { span, holder, outerHolder } = slices;
  const out = Uint8Array.from(span, (of) => vis[of]);
  if (!out.includes(0)) return out;
  /** @type {Set<number>} holders with a slice drawn under them */
  const holding = new Set();
  for (let i = 0; i < out.length; i++) {
    if (!out[i]) continue;
    for (let up = holder[i]; up >= 0 && !holding.has(up); up = outerHolder.get(up) ?? -1) holding.add(up);
  }
  /** @param {number} of a holder @returns {number} its visibility, if drawn with none of its slices drawn */
  const own = (of) => (holding.has(of) ? 0 : vis[of]);
  // What a hidden slice under each KV sender takes: its own, else its nearest holder's
  // above. The map lists a sender after the holder it is under, so one pass resolves all.
  /** @type {Map<number, number>} */
  const resolved = new Map();
  for (const [sender, above] of outerHolder) {
    resolved.set(sender, own(sender) || (resolved.get(above) ?? own(above)));
  }
  for (let i = 0; i < out.length; i++) {
    if (!out[i]) out[i] = resolved.get(holder[i]) ?? own(holder[i]);
  }
  return out;
}

/**
 * Seconds per band code of pieces (index 0 unused).
 * @param {Data} data
 * @param {PhasePieces} pieces
 * @returns {Float64Array}
 */
export function secondsByCode(data, pieces) {
  const out = new Float64Array(data.bandPhases.length + 1);
  for (let i = 0; i < pieces.n; i++) out[pieces.code[i]] += pieces.end[i] - pieces.start[i];
  return out;
}

/** @returns {PhasePieces} */
function emptyPieces() {
  return { start: new Float64Array(0), end: new Float64Array(0), code: new Uint8Array(0), n: 0 };
}

/**
 * `pieces`, every one bright (0) or faint (1).
 * @param {PhasePieces} pieces
 * @param {number} dim
 * @returns {BandPieces}
 */
function withDim(pieces, dim) {
  return { ...pieces, dim: new Uint8Array(pieces.n).fill(dim) };
}

/**
 * `front` bright, and `back` faint where `front` has no piece.
 * @param {PhasePieces} front
 * @param {PhasePieces} back
 * @returns {BandPieces}
 */
function overlay(front, back) {
  /** @type {[number, number, number, number][]} start, end, code, dim */
  const parts = [];
  for (let i = 0; i < front.n; i++) parts.push([front.start[i], front.end[i], front.code[i], 0]);
  let first = 0;
  for (let i = 0; i < back.n; i++) {
    let from = back.start[i];
    const to = back.end[i];
    while (first < front.n && front.end[first] <= from) first++;
    for (let k = first; k < front.n && front.start[k] < to && from < to; k++) {
      if (front.start[k] > from) parts.push([from, front.start[k], back.code[i], 1]);
      from = Math.max(from, front.end[k]);
    }
    if (to > from) parts.push([from, to, back.code[i], 1]);
  }
  parts.sort((a, b) => a[0] - b[0]);
  return {
    start: Float64Array.from(parts, (part) => part[0]),
    end: Float64Array.from(parts, (part) => part[1]),
    code: Uint8Array.from(parts, (part) => part[2]),
    dim: Uint8Array.from(parts, (part) => part[3]),
    n: parts.length,
  };
}

/** @returns {Slices} */
function emptySlices() {
  return { start: [], end: [], code: [], span: [], parent: [], low: [], high: [], holder: [], outerHolder: new Map() };
}

/**
 * @typedef {Object} Slices
 * @property {number[]} start
 * @property {number[]} end
 * @property {number[]} code band code (a slice's `data.spanBand`, never 0: deriveEngine gives every engine span but a holder one)
 * @property {number[]} span the slice's span (a wait: the slice it lies in)
 * @property {number[]} parent index of the slice it nests in, -1 none
 * @property {number[]} low its window: the span outside the engine its request hangs under
 * @property {number[]} high
 * @property {number[]} holder the nearest holder span above it: its request, or the KV sender it is under
 * @property {Map<number, number>} outerHolder a KV sender's nearest holder above it
 */

/**
 * The slices under `requests` (their engine spans but holders), each with its
 * phase, the slice it nests in and its window; then the unsliced wait after each
 * retraction, as a queue slice in the slice it interrupted. A slice comes after
 * the slice it nests in.
 * @param {Data} data
 * @param {number[]} requests of one sample, at least one
 * @returns {Slices}
 */
function slicesOf(data, requests) {
  const queue = data.bandPhases.indexOf(QUEUE) + 1 || OTHER_CODE;
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
  const out = emptySlices();
  /** @type {Map<number, number>} span -> slice */
  const sliceOf = new Map();
  const seen = new Set(requests);
  for (const request of requests) {
    const [low, high] = windowOf(data, request);
    /** @type {[number, number][]} a span to walk and the holder its slices are under */
    const stack = [[request, request]];
    while (stack.length) {
      const [above, holder] = /** @type {[number, number]} */ (stack.pop());
      for (const child of children.get(above) ?? []) {
        if (seen.has(child)) continue; // a cycle in a hostile payload
        seen.add(child);
        if (isHolderSpan(data, child)) {
          out.outerHolder.set(child, holder);
          stack.push([child, child]);
          continue;
        }
        stack.push([child, holder]);
        sliceOf.set(child, out.start.length);
        out.start.push(data.spanStart[child]);
        out.end.push(data.spanEnd[child]);
        out.code.push(data.spanBand[child]);
        out.span.push(child);
        out.parent.push(-1);
        out.low.push(low);
        out.high.push(high);
        out.holder.push(holder);
      }
    }
  }
  for (const [span, slice] of sliceOf) out.parent[slice] = sliceOf.get(data.spanParent[span]) ?? -1;
  for (const wait of requeueWaits(data, out, sliceOf, sample)) {
    out.start.push(wait.start);
    out.end.push(wait.end);
    out.code.push(queue);
    out.span.push(out.span[wait.slice]);
    out.parent.push(wait.slice);
    out.low.push(out.low[wait.slice]);
    out.high.push(out.high[wait.slice]);
    out.holder.push(out.holder[wait.slice]);
  }
  return out;
}

/**
 * The window of a request's slices: the span outside the engine it hangs under
 * (its start, and its end when known), else no bound. An open span's end is
 * unknown (`span_end` is only where it is drawn to), so it clips nothing after its
 * start, as answers/engine.py's `_windows` does with its NaN end.
 * @param {Data} data
 * @param {number} request
 * @returns {[number, number]}
 */
function windowOf(data, request) {
  const owner = data.spanParent[request];
  if (!(owner >= 0 && owner < data.nSpans) || data.spanFlags[owner] & F_ENGINE) return [-Infinity, Infinity];
  const start = data.spanStart[owner];
  const end = data.spanFlags[owner] & F_OPEN ? Infinity : data.spanEnd[owner];
  return [Number.isNaN(start) ? -Infinity : start, Number.isFinite(end) ? end : Infinity];
}

/**
 * SGLang writes no slice for the wait of a retracted request until it runs again:
 * it lies inside the slice the request was put back from, from the `retract` event
 * to that slice's next child. Each such wait with the slice it lies in; a binary
 * search of the slice's children's starts each, so thousands of retractions among
 * thousands of slices cost no product of the two.
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
  /** @type {Map<number, number[]>} slice -> its children's starts, ascending */
  const childStarts = new Map();
  for (let child = 0; child < slices.start.length; child++) {
    const parent = slices.parent[child];
    const start = slices.start[child];
    if (parent < 0 || !Number.isFinite(start)) continue;
    const starts = childStarts.get(parent);
    if (starts) starts.push(start);
    else childStarts.set(parent, [start]);
  }
  for (const starts of childStarts.values()) starts.sort((x, y) => x - y);
  for (let ev = data.evOff[sample]; ev < data.evOff[sample + 1]; ev++) {
    if (data.evName[ev] !== retract) continue;
    const slice = sliceOf.get(data.evParent[ev]);
    const ts = data.evTs[ev];
    if (slice === undefined || !Number.isFinite(ts)) continue;
    const starts = childStarts.get(slice);
    if (!starts) continue;
    const next = firstAtLeast(starts, ts);
    if (next < starts.length) out.push({ start: ts, end: starts[next], slice });
  }
  return out;
}

/**
 * Index of the first of ascending `values` not below `at` (their length: none).
 * @param {number[]} values
 * @param {number} at
 * @returns {number}
 */
function firstAtLeast(values, at) {
  let lo = 0;
  let hi = values.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (values[mid] < at) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** @typedef {{start: number, end: number, code: number}} Piece */

/**
 * The partition of the slices `keep` marks (null: all) as if the others were not
 * there.
 * @param {Slices} slices
 * @param {Uint8Array|null} keep per slice, 1 kept
 * @returns {PhasePieces}
 */
function piecesOf(slices, keep) {
  return partition(ownIntervals(slices, keep));
}

/**
 * Each kept slice's own time as pieces: its interval less the union of its kept
 * child slices' (each clipped to it; a child nests in its nearest kept ancestor),
 * clipped to its window. A slice whose start or end is unknown has none, and its
 * children nest in nothing.
 * @param {Slices} slices
 * @param {Uint8Array|null} keep
 * @returns {Piece[]}
 */
function ownIntervals(slices, keep) {
  const { start, end, low, high } = slices;
  const n = start.length;
  const parentOf = keep ? keptParents(slices.parent, keep) : slices.parent;
  const kept = (/** @type {number} */ i) => !keep || keep[i] === 1;
  const finite = (/** @type {number} */ i) => Number.isFinite(start[i]) && Number.isFinite(end[i]);
  /** @type {[number, number][][]} */
  const inner = Array.from({ length: n }, () => []);
  for (let i = 0; i < n; i++) {
    const parent = parentOf[i];
    if (parent < 0 || !kept(i) || !finite(i) || !finite(parent)) continue;
    const from = Math.max(start[i], start[parent]);
    const to = Math.min(end[i], end[parent]);
    if (to > from) inner[parent].push([from, to]);
  }
  /** @type {Piece[]} */
  const out = [];
  for (let i = 0; i < n; i++) {
    if (!kept(i) || !finite(i)) continue;
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
 * The slice each slice nests in among the kept ones: its nearest kept ancestor, -1
 * none (one pass: a slice comes after the slice it nests in).
 * @param {number[]} parent
 * @param {Uint8Array} keep
 * @returns {Int32Array}
 */
function keptParents(parent, keep) {
  const out = new Int32Array(parent.length);
  for (let i = 0; i < parent.length; i++) {
    const up = parent[i];
    out[i] = up < 0 ? -1 : keep[up] ? up : out[up];
  }
  return out;
}

/**
 * The union of the own times as disjoint pieces in time order: each instant in the
 * highest band code among the own times holding it (the first in the priority);
 * neighbours of one code joined.
 * @param {Piece[]} own
 * @returns {PhasePieces}
 */
function partition(own) {
  /** @type {[number, number, number][]} time, +1 start / -1 end, band code */
  const points = [];
  for (const piece of own) points.push([piece.start, 1, piece.code], [piece.end, -1, piece.code]);
  points.sort((a, b) => a[0] - b[0]);
  /** own pieces holding the instant, per band code */
  const holding = new Int32Array(1 + points.reduce((top, point) => Math.max(top, point[2]), 0));
  const out = { start: /** @type {number[]} */ ([]), end: /** @type {number[]} */ ([]), code: /** @type {number[]} */ ([]) };
  for (let k = 0; k < points.length; k++) {
    const [at, step, code] = points[k];
    holding[code] += step;
    const next = k + 1 < points.length ? points[k + 1][0] : at;
    if (!(next > at)) continue;
    let top = holding.length - 1;
    while (top > 0 && !holding[top]) top--;
    if (!top) continue;
    const last = out.start.length - 1;
    if (last >= 0 && out.end[last] === at && out.code[last] === top) out.end[last] = next;
    else {
      out.start.push(at);
      out.end.push(next);
      out.code.push(top);
    }
  }
  return { start: Float64Array.from(out.start), end: Float64Array.from(out.end), code: Uint8Array.from(out.code), n: out.start.length };
}
