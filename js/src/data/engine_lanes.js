// The engine's spans (flag F_ENGINE) apart from the sample's own, derived once per
// payload. A collapsed row draws the sample's own steps (generation, tools,
// reward) and the engine's work only as a thin band under them, coloured by
// engine phase: per span, the phase of its own time; per lane, whether it holds the
// sample's own spans, engine spans or both; per event, whether the engine wrote it.
//
// Every slice (an engine span under a request span, at any depth) has the phase
// its name sorts into (`meta.engine_phases`), else "other". Request spans and KV
// sender spans (`sglang kv sender`, the prefill half's KV transfer slices under
// it) hold slices and have no phase: no time of their own (answers/engine.py
// HOLDER_SPANS). The band draws the partition of the slices' time the figures
// count (data/engine_partition.js): where slices of several phases overlap (the
// two halves of a PD request, the tokenizer beside the scheduler), the first of
// the one priority vocabularies.json holds; a request's time that no slice covers
// is no phase and is left empty.

import CONTRACT from "../../../slime_trace_widget/view/payload_contract.json" with { type: "json" };
import VOCABULARIES from "../../../slime_trace_widget/vocabularies.json" with { type: "json" };

/** @typedef {import("./decode.js").Data} Data */

const F_ENGINE = CONTRACT.span_flags.engine;
const F_PD_DETAIL = CONTRACT.span_flags.pd_detail;

/** Bits of Data.laneMix: the lane holds spans of the sample's own, of the engine (shown in the band). */
export const LANE_OWN = 1;
export const LANE_BAND = 2;

/** The phase of a slice whose name no phase lists. */
export const OTHER = "other";

/**
 * The span the join draws for a prefill half's KV sender under its request
 * (sources/engine/join.py KV_SENDER_SPAN): it holds slices, counts no time of its own.
 */
export const KV_SENDER_SPAN = "sglang kv sender";

/**
 * Where slices of several phases overlap, the phase an instant counts in and the
 * band shows: the first of these (vocabularies.json engine_phase_priority, which
 * answers/engine.py PRIORITY reads too).
 * @type {string[]}
 */
export const PRIORITY = VOCABULARIES.engine_phase_priority;

/**
 * Phases in the order an instant counts in the first: PRIORITY's, then the
 * payload's phases it does not list (in the payload's order), "other" last.
 * @param {string[]} named the payload's phases (`meta.engine_phases`' keys)
 * @returns {string[]}
 */
export function phasePriority(named) {
  const extra = named.filter((phase) => phase !== OTHER && !PRIORITY.includes(phase));
  return [...PRIORITY.filter((phase) => phase !== OTHER), ...extra, OTHER];
}

/**
 * The band's phases, "other" first: the payload's phases and "other" in reverse
 * phasePriority, so a slice's band code (1 + index here) is higher the earlier its
 * phase comes in the priority.
 * @param {Record<string, string[]>} enginePhases `meta.engine_phases`
 * @returns {string[]}
 */
export function bandPhases(enginePhases) {
  const named = Object.keys(enginePhases);
  return phasePriority(named).filter((phase) => phase === OTHER || named.includes(phase)).reverse();
}

/**
 * Whether engine span `span` is a request span: its parent is none or not the engine's.
 * @param {Data} data
 * @param {number} span
 */
export function isRequestSpan(data, span) {
  if (!(data.spanFlags[span] & F_ENGINE)) return false;
  const parent = data.spanParent[span];
  return parent < 0 || parent >= data.nSpans || !(data.spanFlags[parent] & F_ENGINE);
}

/**
 * Whether engine span `span` holds slices and counts no time of its own: a request
 * span, or a KV sender span (answers/engine.py HOLDER_SPANS).
 * @param {Data} data
 * @param {number} span
 */
export function isHolderSpan(data, span) {
  if (span < 0 || span >= data.nSpans || !(data.spanFlags[span] & F_ENGINE)) return false;
  return isRequestSpan(data, span) || data.names[data.spanName[span]] === KV_SENDER_SPAN;
}

/**
 * Fill `spanBand`, `laneMix`, `evEngine`, `bandPhases` and `hasEngine` of decoded data.
 * @param {Data} data
 */
export function deriveEngine(data) {
  const { nSpans, nEvents } = data;
  const phases = bandPhases(data.meta.engine_phases);
  data.bandPhases = phases;
  /** @type {Map<string, number>} slice name -> band code */
  const codeOfName = new Map();
  for (const [phase, names] of Object.entries(data.meta.engine_phases)) {
    const code = phases.indexOf(phase) + 1;
    for (const name of names) if (!codeOfName.has(name)) codeOfName.set(name, code);
  }
  const otherCode = 1;
  /** @type {Map<number, number>} name index -> band code, for slices */
  const codeOfIndex = new Map();
  let any = false;
  for (let i = 0; i < nSpans; i++) {
    if (!(data.spanFlags[i] & F_ENGINE)) continue;
    any = true;
    if (isHolderSpan(data, i)) continue; // a request or a KV sender: its slices have the time
    const nameIndex = data.spanName[i];
    let code = codeOfIndex.get(nameIndex);
    if (code === undefined) {
      code = codeOfName.get(data.names[nameIndex] ?? "") ?? otherCode;
      codeOfIndex.set(nameIndex, code);
    }
    data.spanBand[i] = code;
  }
  data.hasEngine = any;
  const slots = data.laneBase[data.nSamples] ?? 0;
  data.laneMix = new Uint8Array(slots);
  for (let slot = 0; slot < slots; slot++) {
    let mix = 0;
    for (let i = data.laneSpanOff[slot]; i < data.laneSpanOff[slot + 1]; i++) {
      const fl = data.spanFlags[i];
      if (fl & F_ENGINE) mix |= LANE_BAND;
      else if (!(fl & F_PD_DETAIL)) mix |= LANE_OWN;
    }
    data.laneMix[slot] = mix;
  }
  if (!any) return;
  for (let ev = 0; ev < nEvents; ev++) {
    const parent = data.evParent[ev];
    if (parent >= 0 && parent < nSpans && data.spanFlags[parent] & F_ENGINE) data.evEngine[ev] = 1;
  }
}
