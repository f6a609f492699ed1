// Engine phases of a generation (engine.js) on a hand-built payload: a request
// span under the generation, its slices by phase, a nested slice not counted twice,
// PD halves, and payloads without engine spans.

import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload, F_ENGINE } from "../../src/data/decode.js";
import { enginePhases } from "../../src/data/engine.js";
import { legendInfo } from "../../src/panels/legend.js";
import { makePayload } from "../helpers/make_payload.js";

const PHASES = {
  queue: ["prefill_waiting"],
  prefill: ["prefill_forward"],
  decode: ["decode_loop", "decode_forward"],
  pd: ["decode_bootstrap", "prefill_bootstrap"],
};

/** A generation (0-10 s) with one request (1-9 s) and its slices. */
const SPANS = [
  { sample: 0, start: 0, end: 10, name: "sglang_generate", depth: 0 },
  { sample: 0, start: 1, end: 9, name: "sglang request", depth: 1, parent: 0, lane: 1, flags: F_ENGINE },
  { sample: 0, start: 1, end: 3, name: "prefill_waiting", depth: 2, parent: 1, lane: 2, flags: F_ENGINE },
  { sample: 0, start: 3, end: 4, name: "prefill_forward", depth: 2, parent: 1, lane: 2, flags: F_ENGINE },
  { sample: 0, start: 4, end: 8.5, name: "decode_loop", depth: 2, parent: 1, lane: 2, flags: F_ENGINE },
  { sample: 0, start: 4, end: 5, name: "decode_forward", depth: 3, parent: 4, lane: 3, flags: F_ENGINE },
  { sample: 0, start: 8.5, end: 9, name: "detokenize", depth: 2, parent: 1, lane: 2, flags: F_ENGINE },
];

/**
 * @param {any[]} spans
 * @param {Record<string, any>} [meta]
 */
function decoded(spans, meta = { engine_phases: PHASES }) {
  return decodePayload(makePayload({ samples: [{}], spans, meta }).payload);
}

/**
 * The payload's internal index of the span named `name`.
 * @param {any} d
 * @param {string} name
 */
function indexOf(d, name) {
  for (let i = 0; i < d.nSpans; i++) if (d.names[d.spanName[i]] === name) return i;
  throw new Error(name);
}

const rounded = (/** @type {{phase: string, dur: number}[]} */ rows) =>
  rows.map((row) => [row.phase, Math.round(row.dur * 1000) / 1000]);

test("a generation's engine time by phase, nested slices counted once", () => {
  const d = decoded(SPANS);
  assert.deepEqual(rounded(enginePhases(d, indexOf(d, "sglang_generate"))),
    [["queue", 2], ["prefill", 1], ["decode", 4.5], ["other", 0.5]]);
  // the request span itself gives the same; a slice gives nothing
  assert.deepEqual(rounded(enginePhases(d, indexOf(d, "sglang request"))),
    [["queue", 2], ["prefill", 1], ["decode", 4.5], ["other", 0.5]]);
  assert.deepEqual(enginePhases(d, indexOf(d, "decode_loop")), []);
});

test("both PD halves of a request add up under their generation", () => {
  const d = decoded([
    { sample: 0, start: 0, end: 10, name: "sglang_generate", depth: 0 },
    { sample: 0, start: 1, end: 4, name: "sglang prefill request", depth: 1, parent: 0, lane: 1, flags: F_ENGINE },
    { sample: 0, start: 1, end: 2, name: "prefill_bootstrap", depth: 2, parent: 1, lane: 3, flags: F_ENGINE },
    { sample: 0, start: 2, end: 4, name: "prefill_forward", depth: 2, parent: 1, lane: 3, flags: F_ENGINE },
    { sample: 0, start: 1, end: 9, name: "sglang decode request", depth: 1, parent: 0, lane: 2, flags: F_ENGINE },
    { sample: 0, start: 1, end: 4, name: "decode_bootstrap", depth: 2, parent: 4, lane: 4, flags: F_ENGINE },
    { sample: 0, start: 4, end: 9, name: "decode_loop", depth: 2, parent: 4, lane: 4, flags: F_ENGINE },
  ]);
  assert.deepEqual(rounded(enginePhases(d, indexOf(d, "sglang_generate"))),
    [["prefill", 2], ["decode", 5], ["pd", 4]]);
});

test("no engine spans, no phase table, or a hostile one", () => {
  const plain = decoded([{ sample: 0, start: 0, end: 10, name: "sglang_generate", depth: 0 }]);
  assert.deepEqual(enginePhases(plain, 0), []);
  assert.deepEqual(enginePhases(plain, -1), []);
  const bare = decoded(SPANS, {});
  assert.deepEqual(rounded(enginePhases(bare, indexOf(bare, "sglang_generate"))), [["other", 8]]);
  // names from a payload are data: "__proto__" is a phase like any other, nothing leaks
  const hostile = decoded(SPANS, { engine_phases: JSON.parse('{"__proto__": ["decode_loop"], "decode": "x"}') });
  assert.deepEqual(rounded(enginePhases(hostile, indexOf(hostile, "sglang_generate"))),
    [["__proto__", 4.5], ["other", 3.5]]);
  assert.equal(Object.getPrototypeOf({}), Object.prototype);
  assert.equal(/** @type {any} */ ({}).decode_loop, undefined);
});

test("the legend lists the engine's span names in a group of their own", () => {
  const d = decoded(SPANS);
  const info = legendInfo(d);
  assert.deepEqual(info.spans.map((e) => d.names[e.name]), ["sglang_generate"]);
  assert.deepEqual(new Set(info.engine.map((e) => d.names[e.name])),
    new Set(["sglang request", "prefill_waiting", "prefill_forward", "decode_loop", "decode_forward", "detokenize"]));
});
