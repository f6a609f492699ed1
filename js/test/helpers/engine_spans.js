// Spans of a generation and the engine's spans under it, written as an outline, so a
// test reads as the tree it builds: one span a line, `name start end [lane N]`, nested
// by two spaces a level (a span's parent is the nearest line above it one level up);
// and the decoded payload of a sample Python joined, for tests held to its seconds.

import { decodePayload, F_ENGINE } from "../../src/data/decode.js";
import { makePayload } from "./make_payload.js";

const LINE = /^( *)(\S.*?)\s+(-?[\d.]+)\s+(-?[\d.]+)(?:\s+lane\s+(\d+))?\s*$/;

/**
 * makePayload's spans (all of sample 0) from an outline whose first line is the
 * generation, the sample's own span; every line under it is an engine span (F_ENGINE).
 * @param {string} outline
 */
export function engineTree(outline) {
  const lines = outline.split("\n").filter((line) => line.trim());
  const indent = lines.length ? lines[0].length - lines[0].trimStart().length : 0;
  /** @type {Record<string, any>[]} */
  const spans = [];
  /** @type {number[]} the index of the last span seen at each depth */
  const last = [];
  for (const line of lines) {
    const m = LINE.exec(line.slice(indent));
    if (!m || m[1].length % 2) throw new Error(`not an outline line: ${JSON.stringify(line)}`);
    const depth = m[1].length / 2;
    if (depth > last.length || (depth === 0) !== (spans.length === 0)) {
      throw new Error(`one generation, each span one level under its parent at most: ${JSON.stringify(line)}`);
    }
    /** @type {Record<string, any>} */
    const span = { sample: 0, start: Number(m[3]), end: Number(m[4]), name: m[2], depth };
    if (depth > 0) span.parent = last[depth - 1];
    if (m[5] !== undefined) span.lane = Number(m[5]);
    if (depth > 0) span.flags = F_ENGINE;
    last.length = depth;
    last.push(spans.length);
    spans.push(span);
  }
  return spans;
}

/**
 * A request retracted in its decode_forward (lane 2, span 3): a retract event at 5 s
 * there is followed by the re-run's wait, prefill and decode nested under it (lane 3).
 */
export const RETRACTED_REQUEST = `
    sglang_generate          0    10
      sglang request         1    9    lane 1
        prefill_forward      2.1  3.1  lane 2
        decode_forward       3.1  9    lane 2
          prefill_waiting    5.2  5.5  lane 3
          prefill_forward    5.5  6    lane 3
          decode_forward     6.2  9    lane 3
`;

/**
 * The decoded payload of one sample Python joined (fixtures/engine_phases.json's
 * `cases`, written by js/dev/engine_phase_cases.py), so a test can set what it draws
 * or counts against the seconds Python gave: its spans (engine slices flagged
 * F_ENGINE), each on the lane of its depth, and its events on their span's lane.
 * @param {{spans: {start: number, end: number, name: string, parent: number, depth: number, engine: boolean}[],
 *          events: {ts: number, name: string, parent: number}[]}} sample
 * @param {Record<string, string[]>} phases the payload's `meta.engine_phases`
 */
export function decodedJoinedSample(sample, phases) {
  const spans = sample.spans.map((span) => ({
    sample: 0, start: span.start, end: span.end, name: span.name, parent: span.parent,
    depth: span.depth, lane: span.depth, flags: span.engine ? F_ENGINE : 0,
  }));
  const events = sample.events.map((event) => ({
    sample: 0, ts: event.ts, name: event.name, parent: event.parent, lane: sample.spans[event.parent].depth,
  }));
  return decodePayload(makePayload({ samples: [{}], spans, events, meta: { engine_phases: phases } }).payload);
}
