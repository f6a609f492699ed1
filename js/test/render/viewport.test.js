// The window and scroll arithmetic: clamping, zooming about a point, fitting,
// framing a selection, bringing a row into view.

import { test } from "node:test";
import assert from "node:assert/strict";
import { clampWindow, zoomedWindow, fitRange, focusWindow, scrollToShow, MIN_SPAN } from "../../src/render/viewport.js";

/** The fields of decoded data the window arithmetic reads: two samples, one span, one segment, one event. */
const d = /** @type {any} */ ({
  globalStart: 0,
  globalEnd: 100,
  smpStart: Float32Array.from([10, 40]),
  smpEnd: Float32Array.from([30, 60]),
  spanStart: Float32Array.from([20]),
  spanEnd: Float32Array.from([30]),
  segStart: Float32Array.from([22]),
  segEnd: Float32Array.from([24]),
  evTs: Float32Array.from([50]),
});

test("a window is kept between MIN_SPAN and four times the data, and never all off the data", () => {
  assert.deepEqual(clampWindow(d, 10, 20), { t0: 10, t1: 20 });
  const tiny = clampWindow(d, 5, 5);
  assert.ok(Math.abs(tiny.t1 - tiny.t0 - MIN_SPAN) < 1e-12);
  const wide = clampWindow(d, -1000, 1000);
  assert.equal(wide.t1 - wide.t0, 400);
  const off = clampWindow(d, 1000, 1010);
  assert.ok(off.t0 <= 100 - 10 * 0.1 + 1e-9, "slid back so a tenth of it still shows data");
  assert.deepEqual(clampWindow(d, NaN, 3), { t0: 0, t1: 100 });
});

test("zooming keeps the time under the pointer where it was", () => {
  assert.deepEqual(zoomedWindow({ t0: 0, t1: 100 }, 25, 0.5), [12.5, 62.5]);
  assert.equal(zoomedWindow({ t0: 0, t1: MIN_SPAN }, 0, 0.5), null);
});

test("fit takes the rows' samples, else everything, padded by 1 %", () => {
  assert.deepEqual(fitRange(d, Uint32Array.from([1])), [39.8, 60.2]);
  assert.deepEqual(fitRange(d, null), [-1, 101]);
  assert.deepEqual(fitRange(d, new Uint32Array(0)), [-1, 101]);
});

test("focus frames a span with 15 % either side, centres an event, and needs something to frame", () => {
  const view = { t0: 0, t1: 10 };
  const span = focusWindow(d, /** @type {any} */ ({ type: "span", span: 0, sample: 0, row: 0 }), view, NaN);
  assert.deepEqual(span?.map((x) => Math.round(x * 1e6) / 1e6), [18.5, 31.5]);
  assert.deepEqual(focusWindow(d, /** @type {any} */ ({ type: "segment", seg: 0 }), view, NaN)?.map((x) => Math.round(x * 1e6) / 1e6), [21.7, 24.3]);
  assert.deepEqual(focusWindow(d, /** @type {any} */ ({ type: "event", ev: 0 }), view, NaN), [49, 51]);
  assert.deepEqual(focusWindow(d, null, view, 70), [65, 75]);
  assert.equal(focusWindow(d, null, view, NaN), null);
});

test("scrolling shows a row whole, and leaves a visible row alone", () => {
  const tops = Float64Array.from([0, 20, 40, 200, 220]);
  assert.equal(scrollToShow(tops, 0, 30, 100), 0);
  assert.equal(scrollToShow(tops, 1, 0, 100), null);
  assert.equal(scrollToShow(tops, 3, 0, 100), 120);
  assert.equal(scrollToShow(tops, 2, 0, 100), 40, "taller than the view: its top");
  assert.equal(scrollToShow(tops, -1, 0, 100), null);
  assert.equal(scrollToShow(tops, 4, 0, 100), null);
});
