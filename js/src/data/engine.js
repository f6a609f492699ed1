// Engine phases of a generation: where its time went inside SGLang (queue,
// prefill, decode, PD steps), from the engine spans the kernel joined under it
// (flag F_ENGINE). A request span's own slices are sorted into phases by the
// names the payload lists (`meta.engine_phases`, the kernel's one table);
// nested slices are parts of their parent and are not counted again.

import { F_ENGINE, nameOf } from "./decode.js";

/** @typedef {import("./decode.js").Data} Data */
/** @typedef {{phase: string, dur: number}} EnginePhase */

/**
 * Seconds per engine phase of `span`: a generation span (its requests) or an
 * engine request span (itself). Phases in the payload's order, then "other";
 * empty when the span has no engine request.
 * @param {Data} data
 * @param {number} span internal index
 * @returns {EnginePhase[]}
 */
export function enginePhases(data, span) {
  if (span < 0 || span >= data.nSpans) return [];
  const sample = data.spanSample[span];
  const first = data.spanOff[sample];
  const last = data.spanOff[sample + 1];
  /** @type {Set<number>} */
  const requests = new Set();
  if (data.spanFlags[span] & F_ENGINE) {
    if (!isRequest(data, span)) return [];
    requests.add(span);
  } else {
    for (let i = first; i < last; i++) {
      if (data.spanParent[i] === span && data.spanFlags[i] & F_ENGINE) requests.add(i);
    }
  }
  if (requests.size === 0) return [];
  const phaseOf = phaseTable(data.meta.engine_phases);
  /** @type {Map<string, number>} */
  const seconds = new Map(Object.keys(data.meta.engine_phases).map((phase) => [phase, 0]));
  seconds.set("other", 0);
  for (let i = first; i < last; i++) {
    if (!(data.spanFlags[i] & F_ENGINE) || !requests.has(data.spanParent[i])) continue;
    const phase = phaseOf.get(nameOf(data, data.spanName[i])) ?? "other";
    const length = data.spanEnd[i] - data.spanStart[i];
    if (Number.isFinite(length) && length > 0) seconds.set(phase, (seconds.get(phase) ?? 0) + length);
  }
  return [...seconds].map(([phase, dur]) => ({ phase, dur })).filter((row) => row.dur > 0);
}

/**
 * Whether an engine span is a request span (its parent is not an engine span).
 * @param {Data} data
 * @param {number} span
 */
function isRequest(data, span) {
  const parent = data.spanParent[span];
  return parent < 0 || !(data.spanFlags[parent] & F_ENGINE);
}

/**
 * Slice name -> phase.
 * @param {Record<string, string[]>} phases
 * @returns {Map<string, string>}
 */
function phaseTable(phases) {
  /** @type {Map<string, string>} */
  const out = new Map();
  for (const [phase, names] of Object.entries(phases)) for (const name of names) out.set(name, phase);
  return out;
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
    if (!isRequest(data, span)) return null;
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
