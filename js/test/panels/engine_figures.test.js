// The "Engine vs slime" figures (engine_figures.js) and which spans they read
// (engine.js figureSpans): a generation and its requests, from either side.

import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload, F_ENGINE } from "../../src/data/decode.js";
import { figureSpans } from "../../src/data/engine.js";
import { attrsOf, figureRows, formatFigure, secondsDelta, disagree, FIGURES } from "../../src/panels/engine_figures.js";
import { makePayload } from "../helpers/make_payload.js";

test("the spans compared: a generation's requests, or a request and its generation", () => {
  const { payload, spanNew } = makePayload({
    samples: [{}],
    spans: [
      { sample: 0, start: 0, end: 10, name: "sglang_generate", lane: 0 },
      { sample: 0, start: 1, end: 9, name: "sglang prefill request", lane: 1, parent: 0, flags: F_ENGINE },
      { sample: 0, start: 1, end: 9, name: "sglang decode request", lane: 2, parent: 0, flags: F_ENGINE },
      { sample: 0, start: 2, end: 3, name: "decode_loop", lane: 3, parent: 2, flags: F_ENGINE },
      { sample: 0, start: 11, end: 12, name: "tool_call", lane: 0 },
    ],
  });
  const d = decodePayload(payload);
  const requests = [spanNew[1], spanNew[2]].sort((a, b) => a - b);
  const fromGeneration = figureSpans(d, spanNew[0]);
  assert.deepEqual(fromGeneration && { generation: fromGeneration.generation, requests: fromGeneration.requests.sort((a, b) => a - b) }, { generation: spanNew[0], requests });
  assert.deepEqual(figureSpans(d, spanNew[2]), { generation: spanNew[0], requests: [spanNew[2]] });
  assert.equal(figureSpans(d, spanNew[3]), null, "a slice");
  assert.equal(figureSpans(d, spanNew[4]), null, "no engine request");
  assert.equal(figureSpans(d, 99), null);
});

test("attributes merge start then end values; anything else reads as none", () => {
  assert.deepEqual({ ...attrsOf({ start_attrs: { a: 1, b: 2 }, end_attrs: { b: 3 } }) }, { a: 1, b: 3 });
  assert.deepEqual({ ...attrsOf(null) }, {});
  assert.deepEqual({ ...attrsOf({ start_attrs: [1, 2], end_attrs: "x" }) }, {});
  // a key named like an Object member is data too
  assert.equal(attrsOf({ end_attrs: JSON.parse('{"__proto__": 5}') })["__proto__"], 5);
});

test("figures as shown: durations, counts, lists, objects, long texts cut", () => {
  assert.equal(formatFigure(0.0425, "s"), "42.5 ms");
  assert.equal(formatFigure(1234, "n"), "1,234");
  assert.equal(formatFigure(["stop", "length"], "t"), "stop, length");
  assert.equal(formatFigure({ type: "abort", message: "x" }, "t"), "abort");
  assert.equal(formatFigure({ a: 1 }, "t"), '{"a":1}');
  assert.equal(formatFigure(null, "n"), "");
  assert.equal(formatFigure(undefined, "s"), "");
  assert.equal(formatFigure("x".repeat(500), "t").length, 121);
  assert.equal(formatFigure("<b>tag</b>", "t"), "<b>tag</b>", "text stays text (rendered with textContent)");
});

test("the engine against slime: duration deltas, counts and texts that disagree", () => {
  assert.equal(secondsDelta(0.75, 1.0), "−250 ms");
  assert.equal(secondsDelta(1.25, 1.0), "+250 ms");
  assert.equal(secondsDelta(1, 1), "±0");
  assert.equal(secondsDelta(undefined, 1), "");
  assert.equal(secondsDelta(1, "x"), "");
  assert.ok(disagree(321, 232, "n"));
  assert.ok(!disagree(232, 232, "n"));
  assert.ok(!disagree(["stop"], "stop", "t"), "a list of one reason is that reason");
  assert.ok(!disagree(undefined, 232, "n"), "nothing to disagree with");
  assert.ok(!disagree(0.7, 0.9, "s"), "durations differ by nature: shown as a delta");
});

test("rows: slime's figures beside each request's, figures no one has left out", () => {
  const slime = { queue_time: 0.0335, e2e_latency: 1.14, prompt_tokens: 362, finish_reason: "stop", sglang_request_id: "r1" };
  const prefill = { "gen_ai.latency.time_to_first_token": 0.0425, "gen_ai.usage.prompt_tokens": 362, "engine.host": "engine-a" };
  const decode = { "gen_ai.latency.e2e": 0.75, "gen_ai.response.finish_reasons": ["stop"], "gen_ai.request.id": "r1", "engine.host": "engine-b" };
  const rows = figureRows(slime, [prefill, decode]);
  assert.deepEqual(rows.map((row) => row.label), ["time to first token", "time in queue", "end to end", "prompt tokens", "finish reason", "request id", "engine host"]);
  const e2e = rows.find((row) => row.label === "end to end");
  assert.deepEqual(e2e && [e2e.slime, ...e2e.engine], [1.14, undefined, 0.75]);
  assert.equal(figureRows({}, [{}]).length, 0);
  // every figure of the issue has a row
  const keys = FIGURES.map(([, , key]) => key);
  for (const key of ["time_to_first_token", "time_in_queue", "latency.e2e", "time_in_model_prefill", "time_in_model_decode", "prompt_tokens", "completion_tokens", "cached_tokens", "finish_reasons"]) {
    assert.ok(keys.some((k) => k.includes(key)), key);
  }
});
