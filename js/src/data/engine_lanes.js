// The engine's spans (flag F_ENGINE) apart from the sample's own, derived once per
// payload. A collapsed row draws the sample's own steps (generation, tools,
// reward) and the engine's work only as a thin band under them, coloured by
// engine phase: per span, the band phase it shows; per lane, whether it holds the
// sample's own spans, band spans or both; per event, whether the engine wrote it.
//
// The band shows each request's own slices (children of a request span, or of a
// KV sender span under it) by the phase their name sorts into
// (`meta.engine_phases`), over the request span itself as "other" (time in the
// engine that no slice covers); nested slices are parts of their parent and stay
// out of it. A KV sender span (`sglang kv sender`) holds the prefill half's KV
// transfer slices (Mooncake's) and, like a request, has no time of its own in the
// band: its slices show, it does not (answers/engine.py HOLDER_SPANS).
//
// Where slices of several phases overlap (the two halves of a PD request, the
// tokenizer beside the scheduler), the band shows the phase the figures count the
// instant in (answers/engine.py's partition, the details panel's data/engine.js):
// the first of the one priority vocabularies.json holds, drawn on top.

import CONTRACT from "../../../slime_trace_widget/view/payload_contract.json" with { type: "json" };
import VOCABULARIES from "../../../slime_trace_widget/vocabularies.json" with { type: "json" };

/** @typedef {import("./decode.js").Data} Data */

const F_ENGINE = CONTRACT.span_flags.engine;
const F_PD_DETAIL = CONTRACT.span_flags.pd_detail;

/** Bits of Data.laneMix. */
export const LANE_OWN = 1;
export const LANE_BAND = 2;

/** Band phase of what a request does outside its known slices. */
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
 * The band's phases in drawing order, last on top: the payload's phases and
 * "other" in reverse phasePriority, so where slices overlap the phase the figures
 * count shows ("other" first, at the bottom).
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
  const senderName = data.names.indexOf(KV_SENDER_SPAN);
  /** @type {Map<number, number>} name index -> band code, for slices */
  const codeOfIndex = new Map();
  let any = false;
  for (let i = 0; i < nSpans; i++) {
    if (!(data.spanFlags[i] & F_ENGINE)) continue;
    any = true;
    const nameIndex = data.spanName[i];
    if (nameIndex === senderName) continue; // a KV sender: its slices show, not it
    if (isRequestSpan(data, i)) {
      data.spanBand[i] = otherCode;
      continue;
    }
    if (!isHolderSpan(data, data.spanParent[i])) continue; // a part of a slice
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
      if (fl & F_ENGINE) mix |= data.spanBand[i] ? LANE_BAND : 0;
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
