// Spans of a generation and the engine's spans under it, written as an outline, so a
// test reads as the tree it builds: one span a line, `name start end [lane N]`, nested
// by two spaces a level (a span's parent is the nearest line above it one level up).

import { F_ENGINE } from "../../src/data/decode.js";

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
