// Which ticks of the time axis carry a label. Ticks are at least 96 px apart, but a
// label can be wider than that (hours in the millions on a dump whose times mix
// seconds and milliseconds): then only every k-th tick is labelled, k the same for
// the whole axis and the labelled ticks the same ones as the view pans, and no two
// labels ever overlap.

/** Where a label starts, right of its tick, px. */
export const LABEL_OFFSET = 4;
/** The least room between one label's end and the next one's start, px. */
export const LABEL_GAP = 8;
/** Most ticks looked at in one paint (the axis is never wider than this many steps). */
export const MAX_TICKS = 200;

/** @typedef {{time: number, x: number, text: string}} AxisLabel */

/**
 * The times of the ticks from `firstTick` to `lastTime`, `step` apart, at most
 * MAX_TICKS, each later than the one before. Counted by index, not by adding `step`:
 * far from time 0 (a dump mixing seconds and milliseconds puts a sample at 1.7e12 s)
 * a step below the spacing of doubles there leaves `tick + step` equal to `tick`, and
 * a loop waiting for it to pass `lastTime` never ended.
 * @param {number} firstTick
 * @param {number} step
 * @param {number} lastTime
 * @returns {number[]}
 */
export function tickTimes(firstTick, step, lastTime) {
  /** @type {number[]} */
  const times = [];
  if (!(step > 0)) return times;
  for (let index = 0; index < MAX_TICKS; index++) {
    const tick = firstTick + index * step;
    if (!(tick <= lastTime)) break;
    if (times.length && tick <= times[times.length - 1]) continue;
    times.push(tick);
  }
  return times;
}

/**
 * The labels of the ticks from `firstTick` to `lastTime`, `step` apart.
 * @param {number} firstTick
 * @param {number} step
 * @param {number} lastTime
 * @param {(time: number) => number} xAt the tick's x on the canvas
 * @param {(time: number) => string} textAt the tick's label
 * @param {(text: string) => number} widthOf a label's width, px
 * @returns {AxisLabel[]}
 */
export function axisLabels(firstTick, step, lastTime, xAt, textAt, widthOf) {
  /** @type {(AxisLabel & {width: number, index: number})[]} */
  const ticks = [];
  for (const tick of tickTimes(firstTick, step, lastTime)) {
    const time = Math.abs(tick) < step * 1e-6 ? 0 : tick;
    const text = textAt(time);
    ticks.push({ time, x: xAt(time), text, width: widthOf(text), index: ticks.length });
  }
  const every = labelEvery(ticks);
  if (every > 1) {
    // Counted from time 0 where the tick's number is exact, so panning keeps the
    // same ticks labelled; from the first tick shown otherwise.
    const exact = ticks.every((tick) => Number.isSafeInteger(Math.round(tick.time / step)));
    for (const tick of ticks) tick.index = exact ? Math.round(tick.time / step) : tick.index;
  }
  /** @type {AxisLabel[]} */
  const labels = [];
  let freeFrom = -Infinity;
  for (const tick of ticks) {
    if (((tick.index % every) + every) % every !== 0) continue;
    const start = tick.x + LABEL_OFFSET;
    if (start < freeFrom) continue; // labels of unequal widths: never one over another
    labels.push({ time: tick.time, x: tick.x, text: tick.text });
    freeFrom = start + tick.width + LABEL_GAP;
  }
  return labels;
}

/**
 * How many ticks apart labels go: 1 while the widest label fits between two ticks.
 * @param {{x: number, width: number}[]} ticks
 */
function labelEvery(ticks) {
  if (ticks.length < 2) return 1;
  const spacing = ticks[1].x - ticks[0].x;
  const widest = Math.max(...ticks.map((tick) => tick.width));
  const needed = widest + LABEL_GAP;
  if (!(spacing > 0) || needed <= spacing) return 1;
  // At most one label per screen of ticks: among that many in a row, one is counted 0.
  return Math.min(ticks.length, Math.ceil(needed / spacing));
}
