import { test } from "node:test";
import assert from "node:assert/strict";
import { formatDuration, formatEpoch, formatTick, niceStep, formatMs, formatNumber, formatPct } from "../../src/util/format.js";

test("formatDuration matches the documented styles", () => {
  assert.equal(formatDuration(850e-6), "850 µs");
  assert.equal(formatDuration(0.0123), "12.3 ms");
  assert.equal(formatDuration(4.35), "4.35 s");
  assert.equal(formatDuration(5 * 60 + 46.8), "5m 46.8s");
  assert.equal(formatDuration(3600 + 2 * 60), "1h 02m");
  assert.equal(formatDuration(0), "0 s");
  assert.equal(formatDuration(NaN), "—");
  assert.equal(formatDuration(-4.35), "-4.35 s");
  assert.equal(formatDuration(2.5e-6), "2.5 µs");
  assert.equal(formatDuration(0.123), "123 ms");
  assert.equal(formatDuration(45.67), "45.7 s");
});

test("formatDuration rounding never shows 60s or 1000 ms", () => {
  assert.equal(formatDuration(0.99996), "1.00 s");
  assert.equal(formatDuration(59.99), "1m 0.0s");
  assert.equal(formatDuration(119.99), "2m 0.0s");
  assert.equal(formatDuration(3599.99), "1h 00m");
  assert.equal(formatDuration(7199.9), "2h 00m");
  assert.equal(formatDuration(0.0009996), "1.00 ms");
  assert.equal(formatDuration(0.09996), "100 ms");
  assert.equal(formatDuration(0.009996), "10.0 ms");
  assert.equal(formatDuration(9.996), "10.0 s");
  assert.equal(formatDuration(0.0999), "99.9 ms");
});

test("formatEpoch writes a time before 1970 with its own second's milliseconds", () => {
  const shown = formatEpoch(-0.5);
  assert.match(shown, /:59\.500$/);
  assert.match(formatEpoch(1.5), /:01\.500$/);
  assert.match(formatEpoch(1700000000.1234), /\.123$/);
});

test("niceStep gives whole days in 1-2-5 steps past a day", () => {
  assert.equal(niceStep(1 / 86400, 96), 100 * 86400);
  assert.equal(niceStep(1 / 86400, 150), 200 * 86400);
  assert.equal(niceStep(96 / (1.5 * 86400), 96), 2 * 86400);
});

test("niceStep gives 1-2-5 steps and minute multiples", () => {
  assert.equal(niceStep(100, 80), 1);
  assert.equal(niceStep(1000, 80), 0.1);
  assert.equal(niceStep(10000, 80), 0.01);
  assert.equal(niceStep(1, 80), 120);
  assert.equal(niceStep(3, 80), 30);
  assert.equal(niceStep(8, 80), 10);
  for (let k = -6; k < 6; k++) {
    const pps = Math.pow(10, k) * 3.7;
    const step = niceStep(pps, 80);
    assert.ok(step * pps >= 80 * (1 - 1e-9), `step ${step} at ${pps}`);
  }
});

test("formatTick labels by step", () => {
  assert.equal(formatTick(120, 60), "2m");
  assert.equal(formatTick(150, 30), "2m 30s");
  assert.equal(formatTick(12, 2), "12 s");
  assert.equal(formatTick(12.5, 0.5), "12.5 s");
  assert.equal(formatTick(70.25, 0.05), "1m 10.25s");
  assert.equal(formatTick(3600 * 2, 3600), "2h 00m");
  assert.equal(formatTick(100.00025, 0.00005, 100), "+250 µs");
  assert.equal(formatTick(0, 1), "0");
  assert.equal(formatTick(0, 60), "0");
});

test("small number helpers", () => {
  assert.equal(formatMs(0.0123), "12.3 ms");
  assert.equal(formatMs(0.1234), "123 ms");
  assert.equal(formatMs(0.00123), "1.23 ms");
  assert.equal(formatNumber(1234), "1,234");
  assert.equal(formatNumber(0.5), "0.5");
  assert.equal(formatNumber(NaN), "—");
  assert.equal(formatNumber(-0), "0");
  assert.equal(formatPct(0.1234), "12.3%");
});
