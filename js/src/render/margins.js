// The timeline's margins, painted after the rows: the row-label gutter (labels,
// expand carets, lane names, status dots) and the time axis with its ticks and
// the cursor and brush pills.

import { axisLabels, LABEL_OFFSET, tickTimes } from "./axis_labels.js";
import { roundRect } from "./canvas.js";
import { sampleLabel, statusOf } from "../data/decode.js";
import { laneLabel } from "../data/lane_labels.js";
import { ROW_PAD } from "../data/layout.js";
import { rowFill, stripFill, STRIP_W } from "./fate_rows.js";
import { paintFinishFlags } from "./finish_marker.js";
import { xOf, canvasY } from "./hit.js";
import { formatTick, formatDuration } from "../util/format.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("./draw.js").Painter} Painter */
/** @typedef {import("./draw.js").Scene} Scene */

/**
 * Row labels, expand carets, lane names, status dots.
 * @param {Painter} painter
 * @param {Scene} scene
 * @param {number} r0
 * @param {number} r1
 */
export function paintGutter(painter, scene, r0, r1) {
  const { ctx } = painter;
  const { d: data, L: layout, g: geometry, theme } = scene;
  const top = geometry.axisH;
  ctx.fillStyle = theme.bg1;
  ctx.fillRect(0, top, geometry.gutter, painter.h - top);
  ctx.save();
  ctx.beginPath();
  ctx.rect(0, top, geometry.gutter, painter.h - top);
  ctx.clip();
  const laneH = layout.laneH;
  const fontSize = laneH >= 16 ? 12 : laneH >= 11 ? 11 : 9;
  const font = `${fontSize}px ${theme.font}`;
  const small = `${Math.min(fontSize, 10)}px ${theme.font}`;
  ctx.textBaseline = "middle";
  for (let row = r0; row < r1; row++) {
    const sample = layout.rows[row];
    const y0 = canvasY(geometry, layout.rowTop[row]);
    const rowH = layout.rowTop[row + 1] - layout.rowTop[row];
    const bg = rowFill(scene, row);
    if (bg) {
      ctx.fillStyle = bg;
      ctx.fillRect(0, y0, geometry.gutter, rowH);
    }
    const strip = stripFill(scene, row);
    if (strip) {
      ctx.fillStyle = strip;
      ctx.fillRect(0, y0, STRIP_W, rowH);
    }
    const cy = y0 + ROW_PAD + laneH / 2;
    if (laneH < 7) continue;
    const canExpand = data.nLanes[sample] > 1;
    if (canExpand) {
      ctx.fillStyle = theme.fg2;
      ctx.beginPath();
      if (layout.expanded[row]) {
        ctx.moveTo(6, cy - 2);
        ctx.lineTo(14, cy - 2);
        ctx.lineTo(10, cy + 3);
      } else {
        ctx.moveTo(8, cy - 4);
        ctx.lineTo(13, cy);
        ctx.lineTo(8, cy + 4);
      }
      ctx.closePath();
      ctx.fill();
    }
    const status = statusOf(data, sample).toLowerCase(); // as the ledger reads it
    const bad = status && status !== "completed";
    const untraced = Number.isNaN(data.smpStart[sample]);
    ctx.font = font;
    ctx.fillStyle = untraced ? theme.fg2 : theme.fg1;
    const label = sampleLabel(data, sample) + (untraced ? " (untraced)" : "");
    const maxW = geometry.gutter - 20 - (bad ? 14 : 6);
    ctx.fillText(painter.fit(font, label, maxW), 18, cy + 0.5);
    if (bad) {
      ctx.fillStyle = status === "truncated" ? "#e0912f" : status === "pending" ? theme.fg2 : theme.error;
      ctx.beginPath();
      ctx.arc(geometry.gutter - 9, cy, 3.5, 0, Math.PI * 2);
      ctx.fill();
    }
    if (layout.expanded[row] && laneH >= 11) {
      ctx.font = small;
      ctx.fillStyle = theme.fg2;
      ctx.textAlign = "right";
      const base = data.laneBase[sample];
      for (let laneIndex = 1; laneIndex < data.nLanes[sample]; laneIndex++) {
        const text = fitLaneLabel(painter, small, laneLabel(data, base + laneIndex), geometry.gutter - 34);
        if (text) ctx.fillText(text, geometry.gutter - 8, y0 + ROW_PAD + laneIndex * laneH + laneH / 2 + 0.5);
      }
      ctx.textAlign = "left";
    }
  }
  ctx.restore();
  ctx.fillStyle = theme.border1;
  ctx.fillRect(geometry.gutter - 1, top, 1, painter.h - top);
}

/**
 * Time axis with readable relative ticks, cursor and brush labels.
 * @param {Painter} painter
 * @param {Scene} scene
 * @param {number} step
 * @param {number} firstTick
 */
export function paintAxis(painter, scene, step, firstTick) {
  const { ctx } = painter;
  const { g: geometry, theme } = scene;
  const width = painter.w;
  const axisH = geometry.axisH - (geometry.tracksH || 0); // the load tracks are under the axis
  ctx.fillStyle = theme.bg1;
  ctx.fillRect(0, 0, width, axisH);
  ctx.fillStyle = theme.border1;
  ctx.fillRect(0, axisH - 1, width, 1);
  const font = `11px ${theme.font}`;
  ctx.font = font;
  ctx.textBaseline = "middle";
  const offsetMode = step < 1e-3;
  const base = offsetMode ? Math.floor(geometry.t0 / (step * 10)) * step * 10 : 0;
  ctx.fillStyle = theme.fg2;
  ctx.fillText(offsetMode ? `@ ${formatTick(base, 1e-3)}` : "sample", 8, axisH / 2);
  ctx.save();
  ctx.beginPath();
  ctx.rect(geometry.plotX - 1, 0, geometry.plotW + 12, axisH);
  ctx.clip();
  ctx.strokeStyle = theme.border1;
  ctx.beginPath();
  for (const tick of tickTimes(firstTick, step, geometry.t1)) {
    const x = Math.round(xOf(geometry, tick)) + 0.5;
    ctx.moveTo(x, axisH - 6);
    ctx.lineTo(x, axisH);
  }
  ctx.stroke();
  ctx.fillStyle = theme.fg1;
  const labels = axisLabels(firstTick, step, geometry.t1, (time) => xOf(geometry, time),
    (time) => formatTick(time, step, base), (text) => painter.textWidth(font, text));
  for (const label of labels) ctx.fillText(label.text, label.x + LABEL_OFFSET, axisH / 2 - 1);
  paintFinishFlags(painter, scene, axisH);
  ctx.font = font;
  const pill = (/** @type {number} */ x, /** @type {string} */ text, /** @type {string} */ bg) => {
    const pillWidth = painter.textWidth(font, text) + 10;
    const px = Math.min(Math.max(x - pillWidth / 2, geometry.plotX), geometry.plotX + geometry.plotW - pillWidth);
    ctx.fillStyle = bg;
    ctx.beginPath();
    roundRect(ctx, px, 3, pillWidth, axisH - 8, 4);
    ctx.fill();
    ctx.fillStyle = "#ffffff";
    ctx.fillText(text, px + 5, axisH / 2 - 1);
  };
  if (scene.brush) {
    const start = Math.min(scene.brush[0], scene.brush[1]);
    const end = Math.max(scene.brush[0], scene.brush[1]);
    pill((xOf(geometry, start) + xOf(geometry, end)) / 2, `${formatDuration(end - start)}`, theme.brand);
  }
  if (Number.isFinite(scene.cursor) && scene.cursor >= geometry.t0 && scene.cursor <= geometry.t1) pill(xOf(geometry, scene.cursor), formatDuration(scene.cursor), theme.cursor);
  ctx.restore();
}

/**
 * A lane's label cut to `maxW` px: the names cut with an ellipsis, the engine
 * role ("[P]", "[D]") kept whole after them.
 * @param {Painter} painter
 * @param {string} font
 * @param {import("../data/lane_labels.js").LaneLabel} label
 * @param {number} maxW
 */
export function fitLaneLabel(painter, font, label, maxW) {
  if (!label.role) return painter.fit(font, label.names, maxW);
  const roleW = painter.textWidth(font, ` ${label.role}`);
  const names = painter.fit(font, label.names, maxW - roleW);
  return names ? `${names} ${label.role}` : painter.fit(font, label.role, maxW);
}

/**
 * The message over an empty plot (no samples, or none matching the filter).
 * @param {Painter} painter
 * @param {import("../ui/theme.js").Theme} theme
 * @param {Data} data
 * @param {import("./hit.js").Geo} geometry
 */
export function paintEmpty(painter, theme, data, geometry) {
  const ctx = painter.ctx;
  ctx.fillStyle = theme.fg2;
  ctx.font = `13px ${theme.font}`;
  ctx.textBaseline = "middle";
  const msg = data.nSamples === 0 ? "no samples in this payload" : "no samples match the filter";
  ctx.fillText(msg, geometry.plotX + 12, geometry.axisH + 30);
}
