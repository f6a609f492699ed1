// The engines' load as counter tracks between the time axis and the sample rows
// (data/load_tracks.js holds the series): one small step chart per track
// (running, queued, KV-cache token usage, throughput, retractions), summed over
// the engines or one per engine, on the rows' time axis, so pan and zoom move
// them with the rows. The gutter names each track and reads its value at the
// cursor; the plot draws the cursor through them. Only the visible time window
// is walked, points closer than a pixel folded into their peak.

import { drawnSeries, trackMax, seriesLabel, valueAt, lastAtOrBefore, formatLoadValue, UNITS } from "../data/load_tracks.js";
import { xOf } from "./hit.js";
import { tickTimes } from "./axis_labels.js";
import { loadTrackColor, mix } from "./colors.js";

/** @typedef {import("../data/load_tracks.js").Load} Load */
/** @typedef {import("../data/load_tracks.js").Series} Series */

/** Px per track summed, per track per engine, the least, and the most all tracks take. */
export const TRACK_H = 26;
export const SPLIT_TRACK_H = 18;
export const MIN_TRACK_H = 10;
export const MAX_TRACKS_H = 220;
/** Px above and below the tracks. */
export const TRACKS_PAD = 3;

/**
 * @typedef {Object} TracksLayout
 * @property {Series[]} series the series drawn, top to bottom
 * @property {number} trackH px per track
 * @property {number} hidden series that did not fit (left out at the bottom, a note in their place)
 * @property {number} height px of the whole band (0: no tracks)
 */

/** @type {WeakMap<Load, Map<boolean, TracksLayout>>} */
const LAYOUTS = new WeakMap();

/**
 * The tracks' layout (cached per load and mode): what is drawn, how high.
 * @param {Load} load
 * @param {boolean} split one track per engine
 * @returns {TracksLayout}
 */
export function tracksLayout(load, split) {
  let byMode = LAYOUTS.get(load);
  if (!byMode) LAYOUTS.set(load, (byMode = new Map()));
  let layout = byMode.get(split);
  if (layout) return layout;
  const all = drawnSeries(load, split);
  if (!all.length) {
    layout = { series: [], trackH: 0, hidden: 0, height: 0 };
  } else {
    const room = MAX_TRACKS_H - 2 * TRACKS_PAD;
    const trackH = Math.max(MIN_TRACK_H, Math.min(split ? SPLIT_TRACK_H : TRACK_H, Math.floor(room / all.length)));
    const fits = Math.floor(room / trackH);
    const shown = all.length <= fits ? all.length : fits - 1;
    const rows = Math.min(all.length, fits);
    layout = { series: all.slice(0, shown), trackH, hidden: all.length - shown, height: rows * trackH + 2 * TRACKS_PAD };
  }
  byMode.set(split, layout);
  return layout;
}

/**
 * Px the tracks take (0 without load).
 * @param {Load} load
 * @param {boolean} split
 */
export function tracksHeight(load, split) {
  return tracksLayout(load, split).height;
}

/**
 * Each drawn track's box (canvas px) and value at `cursor` (NaN without one).
 * @param {Load} load
 * @param {boolean} split
 * @param {import("./hit.js").Geo} geometry
 * @param {number} cursor
 */
export function trackReadings(load, split, geometry, cursor) {
  const layout = tracksLayout(load, split);
  const top = geometry.axisH - geometry.tracksH + TRACKS_PAD;
  return layout.series.map((series, k) => ({
    series,
    label: seriesLabel(load, series),
    value: Number.isFinite(cursor) ? valueAt(series, cursor) : NaN,
    box: { x: geometry.plotX, y: top + k * layout.trackH, w: geometry.plotW, h: layout.trackH - 2 },
  }));
}

/**
 * Paint the tracks (after the rows, before the axis).
 * @param {import("./draw.js").Painter} painter
 * @param {import("./draw.js").Scene} scene
 * @param {number} step tick step of the axis (s)
 * @param {number} firstTick
 */
export function paintTracks(painter, scene, step, firstTick) {
  const { ctx } = painter;
  const { d: data, g: geometry, theme } = scene;
  if (!geometry.tracksH) return;
  const layout = tracksLayout(data.load, scene.loadSplit);
  const top = geometry.axisH - geometry.tracksH;
  ctx.fillStyle = theme.bg1;
  ctx.fillRect(0, top, painter.w, geometry.tracksH);
  ctx.fillStyle = theme.border1;
  ctx.fillRect(0, geometry.axisH - 1, painter.w, 1);
  ctx.fillRect(geometry.gutter - 1, top, 1, geometry.tracksH);
  // Grid, as under the rows.
  ctx.save();
  ctx.beginPath();
  ctx.rect(geometry.plotX, top, geometry.plotW, geometry.tracksH - 1);
  ctx.clip();
  ctx.strokeStyle = theme.border2;
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (const tick of tickTimes(firstTick, step, geometry.t1)) {
    const x = Math.round(xOf(geometry, tick)) + 0.5;
    ctx.moveTo(x, top);
    ctx.lineTo(x, geometry.axisH - 1);
  }
  ctx.stroke();
  const readings = trackReadings(data.load, scene.loadSplit, geometry, scene.cursor);
  for (const reading of readings) {
    const { series, box } = reading;
    const color = loadTrackColor(series.track);
    const scale = UNITS[series.track] === "ratio" ? Math.max(1, trackMax(layout.series, series.track)) : trackMax(layout.series, series.track);
    paintSeries(ctx, geometry, series, box, scale, color, mix(color, theme.bg1, 0.7), data.globalEnd);
    if (!Number.isNaN(reading.value) && scene.cursor >= geometry.t0 && scene.cursor <= geometry.t1) {
      ctx.fillStyle = color;
      ctx.beginPath();
      ctx.arc(xOf(geometry, scene.cursor), box.y + box.h - (Math.max(0, reading.value) / scale) * (box.h - 2), 2.5, 0, Math.PI * 2);
      ctx.fill();
    }
  }
  if (Number.isFinite(scene.cursor)) {
    const x = Math.round(xOf(geometry, scene.cursor)) + 0.5;
    ctx.strokeStyle = theme.cursor;
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, geometry.axisH);
    ctx.stroke();
  }
  ctx.restore();
  paintTrackLabels(painter, scene, readings, layout);
}

/**
 * One series as a filled step chart in `box`, from its last scrape before the
 * window to its first after it (the last scrape held to the data's end).
 * @param {CanvasRenderingContext2D} ctx
 * @param {import("./hit.js").Geo} geometry
 * @param {Series} series
 * @param {{x: number, y: number, w: number, h: number}} box
 * @param {number} scale the value at the box's top
 * @param {string} stroke
 * @param {string} fill
 * @param {number} dataEnd time the last value is held to
 */
function paintSeries(ctx, geometry, series, box, scale, stroke, fill, dataEnd) {
  const { ts, value } = series;
  const n = ts.length;
  if (!n) return;
  const base = box.y + box.h;
  const yOf = (/** @type {number} */ v) => base - (Math.max(0, Math.min(v, scale)) / scale) * (box.h - 2);
  const xMin = geometry.plotX - 2;
  const xMax = geometry.plotX + geometry.plotW + 2;
  let i = Math.max(0, lastAtOrBefore(ts, geometry.t0));
  let x = Math.max(xMin, xOf(geometry, ts[i]));
  if (x > xMax) return;
  ctx.beginPath();
  ctx.moveTo(x, base);
  let y = yOf(value[i]);
  ctx.lineTo(x, y);
  let peak = y; // highest point (least y) folded into the current pixel
  for (i++; i < n; i++) {
    const nx = Math.min(xMax, xOf(geometry, ts[i]));
    const ny = yOf(value[i]);
    if (nx - x < 1) {
      if (ny < peak) peak = ny;
      y = ny;
      continue;
    }
    if (peak < y) ctx.lineTo(x, peak);
    ctx.lineTo(x, y);
    ctx.lineTo(nx, y);
    ctx.lineTo(nx, ny);
    x = nx;
    y = ny;
    peak = ny;
    if (nx >= xMax) break;
  }
  if (peak < y) ctx.lineTo(x, peak);
  const end = Math.min(xMax, xOf(geometry, Math.max(dataEnd, ts[n - 1])));
  if (i >= n && end > x) {
    ctx.lineTo(x, y);
    ctx.lineTo(end, y);
    x = end;
  }
  ctx.lineTo(x, base);
  ctx.closePath();
  ctx.fillStyle = fill;
  ctx.fill();
  ctx.strokeStyle = stroke;
  ctx.lineWidth = 1.25;
  ctx.stroke();
}

/**
 * Each track's name on the left of the gutter and its value at the cursor on the right.
 * @param {import("./draw.js").Painter} painter
 * @param {import("./draw.js").Scene} scene
 * @param {ReturnType<typeof trackReadings>} readings
 * @param {TracksLayout} layout
 */
function paintTrackLabels(painter, scene, readings, layout) {
  const { ctx } = painter;
  const { g: geometry, theme } = scene;
  const size = layout.trackH >= 16 ? 11 : 9;
  const font = `${size}px ${theme.font}`;
  const bold = `bold ${size}px ${theme.font}`;
  ctx.save();
  ctx.beginPath();
  ctx.rect(0, geometry.axisH - geometry.tracksH, geometry.gutter - 1, geometry.tracksH);
  ctx.clip();
  ctx.textBaseline = "middle";
  for (const reading of readings) {
    const cy = reading.box.y + reading.box.h / 2 + 0.5;
    const valueText = Number.isNaN(reading.value) ? "" : formatLoadValue(reading.series.track, reading.value);
    const valueW = valueText ? painter.textWidth(bold, valueText) + 6 : 0;
    ctx.fillStyle = loadTrackColor(reading.series.track);
    ctx.fillRect(6, cy - 3, 6, 6);
    ctx.font = font;
    ctx.fillStyle = theme.fg1;
    ctx.fillText(painter.fit(font, reading.label, geometry.gutter - 24 - valueW), 16, cy);
    if (valueText) {
      ctx.font = bold;
      ctx.textAlign = "right";
      ctx.fillText(valueText, geometry.gutter - 8, cy);
      ctx.textAlign = "left";
    }
  }
  if (layout.hidden > 0) {
    ctx.font = `9px ${theme.font}`;
    ctx.fillStyle = theme.fg2;
    const noteY = geometry.axisH - geometry.tracksH + TRACKS_PAD + (layout.series.length + 0.5) * layout.trackH;
    ctx.fillText(`+${layout.hidden} more tracks (summed shows every track)`, 16, noteY);
  }
  ctx.restore();
}
