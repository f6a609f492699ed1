// Engine phases of a generation (engine.js) on hand-built payloads: a request
// span under the generation, its slices by phase, a nested slice not counted twice,
// PD halves overlapping (a partition of wall time, by PRIORITY), a retraction's
// wait, a KV sender holding Mooncake slices, and payloads without engine spans; then
// samples joined by Python with analysis.engine_breakdown's own seconds
// (fixtures/engine_phases.json, written by js/dev/engine_phase_cases.py).

import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload, F_ENGINE } from "../../src/data/decode.js";
import { enginePhases, PRIORITY, RETRACT_EVENT } from "../../src/data/engine.js";
import { KV_SENDER_SPAN } from "../../src/data/engine_lanes.js";
import { legendInfo } from "../../src/panels/legend.js";
import { decodedJoinedSample, engineTree, RETRACTED_REQUEST } from "../helpers/engine_spans.js";
import { makePayload } from "../helpers/make_payload.js";
import PYTHON from "../fixtures/engine_phases.json" with { type: "json" };

const PHASES = {
  queue: ["prefill_waiting"],
  prefill: ["prefill_forward"],
  decode: ["decode_loop", "decode_forward"],
  pd: ["decode_bootstrap", "prefill_bootstrap"],
};

/** A generation (0-10 s) with one request (1-9 s) and its slices. */
const SPANS = engineTree(`
  sglang_generate        0    10
    sglang request       1    9    lane 1
      prefill_waiting    1    3    lane 2
      prefill_forward    3    4    lane 2
      decode_loop        4    8.5  lane 2
        decode_forward   4    5    lane 3
      detokenize         8.5  9    lane 2
`);

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

test("both PD halves of a request: each instant counted once, work over waits", () => {
  const d = decoded(engineTree(`
    sglang_generate            0  10
      sglang prefill request   1  4   lane 1
        prefill_bootstrap      1  2   lane 3
        prefill_forward        2  4   lane 3
      sglang decode request    1  9   lane 2
        decode_bootstrap       1  4   lane 4
        decode_loop            4  9   lane 4
  `));
  // 1-2 s both halves bootstrap (pd once), 2-4 s prefill over the decode half's bootstrap
  assert.deepEqual(rounded(enginePhases(d, indexOf(d, "sglang_generate"))),
    [["prefill", 2], ["decode", 5], ["pd", 1]]);
});

test("no engine spans, no phase table, or a hostile one", () => {
  const plain = decoded([{ sample: 0, start: 0, end: 10, name: "sglang_generate", depth: 0 }]);
  assert.deepEqual(enginePhases(plain, 0), []);
  assert.deepEqual(enginePhases(plain, -1), []);
  const bare = decoded(SPANS, {});
  assert.deepEqual(rounded(enginePhases(bare, indexOf(bare, "sglang_generate"))), [["other", 8]]);
  // names from a payload are data: "__proto__" is a phase like any other, nothing leaks
  const hostile = decoded(SPANS, { engine_phases: JSON.parse('{"__proto__": ["decode_loop"], "decode": "x"}') });
  // decode_loop's own time is "__proto__"; its nested decode_forward is its own, "other"
  assert.deepEqual(rounded(enginePhases(hostile, indexOf(hostile, "sglang_generate"))),
    [["__proto__", 3.5], ["other", 4.5]]);
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

// ---------------------------------------------------------------- the partition

const E = F_ENGINE;
/** The phase names Python's payload sends (answers/engine.py PHASES, Mooncake's among them). */
const REAL = PYTHON.phases;

/** Seconds by phase as an object, rounded to the µs. */
const byPhase = (/** @type {{phase: string, dur: number}[]} */ rows) =>
  Object.fromEntries(rows.map((row) => [row.phase, Math.round(row.dur * 1e6) / 1e6]));

/** Wall time the union of [start, end) intervals covers. */
function union(/** @type {[number, number][]} */ intervals) {
  let total = 0;
  let reach = -Infinity;
  for (const [start, end] of [...intervals].sort((a, b) => a[0] - b[0])) {
    if (end > Math.max(start, reach)) total += end - Math.max(start, reach);
    reach = Math.max(reach, end);
  }
  return total;
}

/** A PD request as SGLang 0.5.23 orders it (tests/answers/test_engine_partition.py): the
 *  decode server waits for the KV cache while the prefill server queues, prefills, sends. */
const PD = engineTree(`
  sglang_generate                0     10
    sglang prefill request       1     3.5   lane 1
      prefill_bootstrap          1     1.5   lane 3
      prefill_waiting            1.5   2.5   lane 3
      prefill_forward            2.5   3     lane 3
      prefill_transfer_kv_cache  3     3.4   lane 3
    sglang decode request        1     9     lane 2
      decode_bootstrap           1     1.5   lane 4
      decode_transferred         1.5   3.45  lane 4
      decode_waiting             3.45  3.6   lane 4
      decode_forward             3.6   9     lane 4
`);

test("overlapping PD halves add up to the wall time they cover, never more", () => {
  const d = decoded(PD, { engine_phases: REAL });
  const phases = enginePhases(d, indexOf(d, "sglang_generate"));
  // the handshake on both servers once (1-1.5 s), the KV transfer until the decode server
  // has it (3-3.45 s); the prefill server's wait while the decode server waits for KV
  // (1.5-2.5 s) and the decode server's batch wait (3.45-3.6 s)
  assert.deepEqual(byPhase(phases), { queue: 1.15, prefill: 0.5, decode: 5.4, pd: 0.95 });
  const covered = union(PD.filter((span) => span.depth === 2).map((span) => [span.start, span.end]));
  const total = phases.reduce((sum, row) => sum + row.dur, 0);
  assert.ok(Math.abs(total - covered) < 1e-9 && covered === 8, `${total} != ${covered}`);
  // one half selected: its own slices' partition
  assert.deepEqual(byPhase(enginePhases(d, indexOf(d, "sglang prefill request"))),
    { queue: 1, prefill: 0.5, pd: 0.9 });
});

test("where own times overlap, the first of prefill, decode, queue, pd, other counts", () => {
  assert.deepEqual(PRIORITY, ["prefill", "decode", "queue", "pd", "other"]);
  const d = decoded(engineTree(`
    sglang_generate            0    6.5
      sglang prefill request   2    4    lane 1
        prefill_forward        2    4    lane 4
      sglang decode request    1    5    lane 2
        decode_forward         1    5    lane 5
      sglang request           0.5  7    lane 3
        tokenize               0.5  6    lane 6
        request_process        0.5  1.5  lane 7
        decode_prepare         4.5  7    lane 8
  `), { engine_phases: REAL });
  // 0.5-1 queue over other, 1-2 decode, 2-4 prefill, 4-5 decode, 5-6.5 pd over other;
  // past the generation's end (6.5 s) nothing counts
  assert.deepEqual(byPhase(enginePhases(d, indexOf(d, "sglang_generate"))),
    { queue: 0.5, prefill: 2, decode: 2, pd: 1.5 });
});

test("a retraction's unsliced wait is queue, the re-run nested in decode_forward its own", () => {
  const spans = engineTree(RETRACTED_REQUEST);
  const events = [
    { sample: 0, ts: 5, name: "retract", lane: 2, parent: 3 },
    // on the request span (no slice held it), and on a slice with no later child: no wait
    { sample: 0, ts: 4, name: "retract", lane: 1, parent: 1 },
    { sample: 0, ts: 8, name: "retract", lane: 3, parent: 6 },
  ];
  const d = decodePayload(makePayload({ samples: [{}], spans, events, meta: { engine_phases: REAL } }).payload);
  // queue: the wait 5-5.2 s and prefill_waiting; decode: 3.1-5, 6-6.2 and the re-run's 6.2-9
  assert.deepEqual(byPhase(enginePhases(d, indexOf(d, "sglang_generate"))),
    { queue: 0.5, prefill: 1.5, decode: 4.9 });
  const plain = decoded(spans, { engine_phases: REAL });
  assert.deepEqual(byPhase(enginePhases(plain, indexOf(plain, "sglang_generate"))),
    { queue: 0.3, prefill: 1.5, decode: 5.1 }, "without the event, decode_forward's own");
});

test("a KV sender holds Mooncake's slices and counts no time of its own", () => {
  for (const name of ["mooncake_send", "mooncake_worker_send", "mooncake_worker_send_session"]) {
    assert.ok(REAL.pd.includes(name), name);
  }
  const spans = engineTree(`
    sglang_generate                      0     10
      sglang prefill request             1     4     lane 1
        prefill_forward                  1     3     lane 3
        ${KV_SENDER_SPAN}                1     3.8   lane 4
          mooncake_send                  3     3     lane 5
          mooncake_worker_send           3     3.5   lane 6
            mooncake_worker_send_session 3.1   3.3   lane 7
      sglang decode request              1     6     lane 2
        decode_transferred               1     3.55  lane 8
        decode_forward                   3.55  6     lane 8
  `);
  const d = decoded(spans, { engine_phases: REAL });
  // prefill 1-3; the transfer 3-3.55 pd (the sender's own 1-3.8 nothing, no "other")
  assert.deepEqual(byPhase(enginePhases(d, indexOf(d, "sglang_generate"))),
    { prefill: 2, decode: 2.45, pd: 0.55 });
  assert.deepEqual(enginePhases(d, indexOf(d, KV_SENDER_SPAN)), [], "a sender is no request");
});

test("the names of the rule are Python's (answers/engine.py)", () => {
  assert.deepEqual(PRIORITY, PYTHON.priority);
  assert.equal(KV_SENDER_SPAN, PYTHON.kv_sender_span);
  assert.equal(RETRACT_EVENT, PYTHON.retract_event);
});

test("samples joined by Python: the phases engine_breakdown gives", () => {
  for (const sample of PYTHON.cases) {
    const d = decodedJoinedSample(sample, REAL);
    /** @type {Record<string, number>} */
    const got = Object.fromEntries(Object.keys(sample.seconds).map((phase) => [phase, 0]));
    let generations = 0;
    for (let i = 0; i < d.nSpans; i++) {
      if (d.spanFlags[i] & E || d.names[d.spanName[i]] !== "sglang_generate") continue;
      generations++;
      for (const row of enginePhases(d, i)) got[row.phase] += row.dur;
    }
    assert.ok(generations > 0, sample.name);
    for (const [phase, seconds] of Object.entries(sample.seconds)) {
      // the payload's times are float32 from the sample's start
      assert.ok(Math.abs(got[phase] - seconds) < 2e-5, `${sample.name}: ${phase} ${got[phase]} != ${seconds}`);
    }
  }
  assert.ok(PYTHON.cases.some((sample) => sample.events.length), "a retraction among them");
  assert.ok(PYTHON.cases.some((sample) => sample.spans.some((span) => span.name === KV_SENDER_SPAN)), "a KV sender");
});
