import { test } from "node:test";
import assert from "node:assert/strict";
import { axisLabels, LABEL_GAP, LABEL_OFFSET, MAX_TICKS, tickTimes } from "../../src/render/axis_labels.js";
import { formatTick, niceStep } from "../../src/util/format.js";

/** A label's width at 6.5 px a character, as an 11 px sans-serif font about has it. */
const widthOf = (/** @type {string} */ text) => text.length * 6.5;

/**
 * The labels of an axis `width` px wide from `t0` over `seconds`, as paintAxis asks.
 * @param {number} t0
 * @param {number} seconds
 * @param {number} [width]
 */
function labelsOf(t0, seconds, width = 900) {
  const pxPerSec = width / seconds;
  const step = niceStep(pxPerSec, 96);
  const firstTick = Math.ceil(t0 / step) * step;
  const xAt = (/** @type {number} */ time) => (time - t0) * pxPerSec;
  return axisLabels(firstTick, step, t0 + seconds, xAt, (time) => formatTick(time, step), widthOf);
}

/** @param {{x: number, text: string}[]} labels */
function assertApart(labels) {
  for (let at = 1; at < labels.length; at++) {
    const previousEnd = labels[at - 1].x + LABEL_OFFSET + widthOf(labels[at - 1].text);
    assert.ok(labels[at].x + LABEL_OFFSET >= previousEnd + LABEL_GAP,
      `${labels[at - 1].text} runs into ${labels[at].text}`);
  }
}

test("every tick is labelled while the labels fit between ticks", () => {
  const labels = labelsOf(0, 60);
  assert.deepEqual(labels.map((label) => label.text), ["0", "10 s", "20 s", "30 s", "40 s", "50 s", "1m 00s"]);
  assertApart(labels);
});

test("labels wider than the ticks' spacing are thinned, never overlapping", () => {
  // A dump mixing seconds and milliseconds: 500 million hours across the axis.
  const seconds = 500e6 * 3600;
  const labels = labelsOf(0, seconds);
  assert.ok(labels.length >= 2, "still labelled");
  assert.ok(labels.slice(1).every((label) => /^\d+h 00m$/.test(label.text)));
  assertApart(labels);
  const all = axisLabels(0, 1, 10, (time) => time * 50, () => "x".repeat(20), widthOf);
  assert.deepEqual(all.map((label) => label.time), [0, 3, 6, 9], "every third: 130 px labels on 50 px ticks");
});

test("thinned labels stay on the same ticks as the view pans", () => {
  const wide = () => "x".repeat(20);
  const xAt = (/** @type {number} */ shift) => (/** @type {number} */ time) => (time - shift) * 50;
  const before = axisLabels(0, 1, 10, xAt(0), wide, widthOf).map((label) => label.time);
  const panned = axisLabels(1, 1, 11, xAt(1), wide, widthOf).map((label) => label.time);
  assert.deepEqual(panned.filter((time) => time <= 10), before.filter((time) => time >= 1));
});

test("labels of unequal widths never run into one another", () => {
  // Ticks 100 px apart, not quite even: the widest label (84.5 px) fits every tick's
  // spacing but the narrowest one, where the next label is left out.
  const xs = [0, 100, 190, 300, 400];
  const texts = ["a", "x".repeat(13), "b", "c", "d"];
  const labels = axisLabels(0, 1, 4, (time) => xs[time], (time) => texts[time], widthOf);
  assert.deepEqual(labels.map((label) => label.text), ["a", "x".repeat(13), "c", "d"]);
  assertApart(labels);
});

test("an axis of one tick or none", () => {
  assert.deepEqual(axisLabels(10, 10, 9, (time) => time, String, widthOf), []);
  assert.deepEqual(axisLabels(0, 10, 9, (time) => time, String, widthOf).map((label) => label.text), ["0"]);
});

test("ticks far from time 0 end however small the step", () => {
  // A sample at 1.7e12 s (a dump mixing seconds and milliseconds) zoomed to a
  // millisecond: tick + step == tick, and the grid's loop never ended.
  const t0 = 1700000000002;
  const step = 1e-4;
  assert.equal(t0 + step, t0);
  const firstTick = Math.ceil(t0 / step) * step;
  const times = tickTimes(firstTick, step, t0 + 1e-3);
  assert.ok(times.length >= 1 && times.length <= MAX_TICKS);
  for (let at = 1; at < times.length; at++) assert.ok(times[at] > times[at - 1]);
  assert.ok(labelsOf(t0, 1e-3).length >= 1);
});

test("ticks are the multiples of the step from the first, as many as fit", () => {
  assert.deepEqual(tickTimes(2, 0.5, 4), [2, 2.5, 3, 3.5, 4]);
  assert.deepEqual(tickTimes(0, 1, 1e9).length, MAX_TICKS);
  assert.deepEqual(tickTimes(0, 0, 1), []);
  assert.deepEqual(tickTimes(0, Number.NaN, 1), []);
});
