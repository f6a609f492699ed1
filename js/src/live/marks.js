// A live view's marks on the timeline canvas, painted after the rows: the
// "now" line, and on each running row that is late, a tag at the now line:
// "stalled 75 s in tool_call" (no record for stall_after seconds, with the span
// it is stuck in) or "straggler" (running longer than the finished p90).

import { nameOf } from "../data/decode.js";
import { xOf, canvasY } from "../render/hit.js";
import { formatDuration } from "../util/format.js";

/** @typedef {import("../render/hit.js").Geo} Geo */
/** @typedef {import("./status.js").LiveStatus} LiveStatus */

const STALL_COLOR = "#d63a3a";
const STRAGGLER_COLOR = "#d9822b";

/**
 * The tag a row gets, or null.
 * @param {import("../data/decode.js").Data} data
 * @param {LiveStatus} status
 * @param {number} sample
 * @returns {{text: string, color: string}|null}
 */
export function rowTag(data, status, sample) {
  if (status.stalled[sample]) {
    const span = status.stuckSpan[sample];
    const where = span >= 0 ? ` in ${nameOf(data, data.spanName[span])}` : "";
    return { text: `stalled ${formatDuration(status.quietFor[sample])}${where}`, color: STALL_COLOR };
  }
  if (status.straggler[sample]) return { text: `straggler ${formatDuration(status.runningFor[sample])}`, color: STRAGGLER_COLOR };
  return null;
}

/**
 * @param {CanvasRenderingContext2D} ctx
 * @param {number} dpr
 * @param {Geo} geometry
 * @param {import("../data/layout.js").Layout} layout
 * @param {import("../data/decode.js").Data} data
 * @param {import("../ui/theme.js").Theme} theme
 * @param {LiveStatus} status
 * @returns {{x: number, tags: {sample: number, text: string, y: number}[]}} the now line's x and the tags painted
 */
export function paintLiveMarks(ctx, dpr, geometry, layout, data, theme, status) {
  const x = xOf(geometry, status.now);
  /** @type {{sample: number, text: string, y: number}[]} */
  const tags = [];
  ctx.save();
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.beginPath();
  ctx.rect(geometry.plotX, geometry.axisH, geometry.plotW, geometry.height - geometry.axisH);
  ctx.clip();
  ctx.strokeStyle = theme.brand;
  ctx.lineWidth = 1.5;
  ctx.setLineDash([4, 3]);
  ctx.beginPath();
  ctx.moveTo(x, geometry.axisH);
  ctx.lineTo(x, geometry.height);
  ctx.stroke();
  ctx.setLineDash([]);
  ctx.font = `11px ${theme.font}`;
  ctx.textBaseline = "middle";
  for (let sample = 0; sample < data.nSamples; sample++) {
    if (!status.stalled[sample] && !status.straggler[sample]) continue;
    const row = layout.rowOfSample[sample];
    if (row < 0) continue;
    const top = canvasY(geometry, layout.rowTop[row]);
    const bottom = canvasY(geometry, layout.rowTop[row + 1]);
    if (bottom < geometry.axisH || top > geometry.height) continue;
    const tag = rowTag(data, status, sample);
    if (!tag) continue;
    const y = Math.min(top + 10, (top + bottom) / 2);
    const width = ctx.measureText(tag.text).width + 8;
    const left = Math.min(x + 4, geometry.plotX + geometry.plotW - width);
    ctx.fillStyle = tag.color;
    ctx.fillRect(left, y - 7, width, 14);
    ctx.fillStyle = "#fff";
    ctx.fillText(tag.text, left + 4, y);
    tags.push({ sample, text: tag.text, y });
  }
  ctx.restore();
  return { x, tags };
}
