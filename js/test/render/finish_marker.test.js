import { test } from "node:test";
import assert from "node:assert/strict";
import { markerAt, markerColor } from "../../src/render/finish_marker.js";

const marker = (/** @type {number} */ x, /** @type {number} */ labelX) => ({ marker: { rollout: 0, time: 0, seconds: 1 }, x, text: "90% finished at 1.00 s", labelX, labelW: 120 });

test("markerAt finds the flag or its label under a point on the axis", () => {
  const placed = [marker(200, 204), marker(400, NaN)];
  assert.equal(markerAt(placed, 203, 10, 26), placed[0]);
  assert.equal(markerAt(placed, 300, 10, 26), placed[0], "on the label");
  assert.equal(markerAt(placed, 396, 10, 26), placed[1]);
  assert.equal(markerAt(placed, 360, 10, 26), null, "between");
  assert.equal(markerAt(placed, 200, 40, 26), null, "below the axis");
  assert.equal(markerAt([], 200, 10, 26), null);
});

test("the marker's colour differs by theme", () => {
  assert.notEqual(markerColor({ dark: true }), markerColor({ dark: false }));
});
