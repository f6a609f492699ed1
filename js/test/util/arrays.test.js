import { test } from "node:test";
import assert from "node:assert/strict";
import { grown } from "../../src/util/arrays.js";
import { RunBuffer, ClusterBuffer, EventScratch } from "../../src/render/lod.js";

test("grown doubles a typed array, keeping its type and values", () => {
  const ids = Int32Array.from([5, -3, 7]);
  const larger = grown(ids);
  assert.ok(larger instanceof Int32Array);
  assert.equal(larger.length, 6);
  assert.deepEqual(Array.from(larger), [5, -3, 7, 0, 0, 0]);
  assert.equal(grown(new Float64Array(2), 9).length, 9);
});

test("level-of-detail buffers keep every item past their first capacity", () => {
  const runs = new RunBuffer(2);
  const clusters = new ClusterBuffer(2);
  const scratch = new EventScratch(2);
  for (let i = 0; i < 9; i++) {
    runs.push(i, i + 0.5, i * 10, i + 1);
    clusters.push(i, -i | 0, i * 3);
    scratch.push(9 - i, i);
  }
  assert.equal(runs.n, 9);
  assert.deepEqual(Array.from(runs.span.subarray(0, 9)), [0, 10, 20, 30, 40, 50, 60, 70, 80]);
  assert.deepEqual(Array.from(clusters.first.subarray(0, 9)), [0, -1, -2, -3, -4, -5, -6, -7, -8]);
  assert.deepEqual(Array.from(clusters.count.subarray(0, 9)), [0, 3, 6, 9, 12, 15, 18, 21, 24]);
  assert.equal(scratch.n, 9);
  assert.deepEqual(Array.from(scratch.ids.subarray(0, 9)), [0, 1, 2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(Array.from(scratch.xs.subarray(0, 9)), [9, 8, 7, 6, 5, 4, 3, 2, 1]);
});
