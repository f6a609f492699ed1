// Engine phases of a generation: where its time went inside SGLang (queue,
// prefill, decode, PD steps), from the engine spans the kernel joined under it
// (flag F_ENGINE), by the rule of answers/engine.py (`phase_seconds`, what
// `analysis.engine_breakdown` gives per sample): the phases partition wall time.
// The seconds are those of the pieces data/engine_partition.js makes, the pieces
// the engine band draws: nesting first, then the priority; request and KV sender
// spans count no time of their own.

import { F_ENGINE } from "./decode.js";
import { OTHER, PRIORITY, isRequestSpan } from "./engine_lanes.js";
import { RETRACT_EVENT, phasePieces, secondsByCode } from "./engine_partition.js";

/** @typedef {import("./decode.js").Data} Data */
/** @typedef {{phase: string, dur: number}} EnginePhase */

export { PRIORITY, RETRACT_EVENT };

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
  const seconds = secondsByCode(data, phasePieces(data, requests));
  /** @type {Map<string, number>} */
  const out = new Map([...Object.keys(data.meta.engine_phases), OTHER].map((phase) => [phase, 0]));
  data.bandPhases.forEach((phase, index) => out.set(phase, (out.get(phase) ?? 0) + seconds[index + 1]));
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
