import { test } from "node:test";
import assert from "node:assert/strict";
import { cellText, columnMaxima } from "../../src/run/run_figures.js";

test("columnMaxima: finite numbers only, text columns skipped", () => {
  const columns = [
    { label: "rollout", key: "rollout_id", kind: "text" },
    { label: "p95", key: "p95", kind: "number" },
    { label: "stragglers", key: "share", kind: "share" },
  ];
  const rows = [{ rollout_id: 0, p95: 3.5, share: 0.1 }, { rollout_id: 1, p95: null, share: NaN },
    { rollout_id: 2, p95: 9, share: "x" }];
  assert.deepEqual(columnMaxima(/** @type {any} */ (rows), /** @type {any} */ (columns)), { p95: 9, share: 0.1 });
  assert.deepEqual(columnMaxima([], /** @type {any} */ (columns)), { p95: 0, share: 0 });
});

test("cellText: shares as percent, few digits, a dash when missing", () => {
  assert.equal(cellText(0.2273, "share"), "22.7%");
  assert.equal(cellText(12, "number"), "12");
  assert.equal(cellText(21.555382, "number"), "21.6");
  assert.equal(cellText(1234.5, "number"), "1235");
  assert.equal(cellText(1226.2, "number"), "1226");
  assert.equal(cellText(99.96, "number"), "100");
  assert.equal(cellText(99.94, "number"), "99.9");
  assert.equal(cellText(-98765.4321, "number"), "-98765");
  assert.equal(cellText("eval", "text"), "eval");
  for (const v of [null, undefined, NaN, Infinity]) assert.equal(cellText(v, "number"), "–");
});
