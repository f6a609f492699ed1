// The details panel's timing rows: a closed span's duration is its recorded one (the
// payload's, then the kernel's exact one once its details arrive), not the difference
// of the payload's float32 offsets and drawn end.

import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeElement } from "../helpers/fake_dom.js";
import { makePayload } from "../helpers/make_payload.js";
import { decodePayload } from "../../src/data/decode.js";
import { renderDetails } from "../../src/panels/panel.js";

const ACTIONS = {
  close() {}, focus() {}, selectSpan() {}, selectEvent() {},
  sampleText: () => new Promise(() => {}),
};

/**
 * The panel's text for span 1 of a sample, given the kernel's `detail`.
 * @param {{start: number, end: number, dur?: number}} span
 * @param {any} detail
 */
function timingText(span, detail) {
  const data = decodePayload(makePayload({
    samples: [{}],
    spans: [{ sample: 0, start: 0, end: 7300, name: "episode", lane: 0, depth: 0 },
      { sample: 0, ...span, name: "tool", lane: 1, depth: 1, parent: 0 }],
  }).payload);
  const host = new FakeElement("div");
  const hit = { type: "span", row: 0, sample: 0, span: 1, t: span.start };
  renderDetails(/** @type {any} */ (host), data, /** @type {any} */ (hit), 1,
    detail ? { status: "ok", detail } : { status: "loading", detail: null }, /** @type {any} */ (ACTIONS));
  return host.textContent;
}

test("a short span far into its sample shows its recorded duration", () => {
  const span = { start: 7000, end: 7000.0003 }; // float32 offsets: 488 µs apart
  assert.match(timingText(span, null), /duration300 µs/);
  assert.match(timingText({ ...span, dur: NaN }, { duration: 0.0003, state: "closed" }), /duration300 µs/);
});

test("an end recorded before its start shows its negative duration", () => {
  assert.match(timingText({ start: 5, end: 5, dur: -2 }, null), /duration-2.00 s/);
  assert.match(timingText({ start: 5, end: 5, dur: NaN }, { duration: -2, state: "closed" }), /duration-2.00 s/);
});
