// The 90%-finished instant of each rollout on the time axis: a flag on the
// axis labelled "90% finished at X s" (X from the rollout's first start, as
// `answers.ledger.tail_price` says) and a dashed line down through the rows,
// so the samples still running after it (the tail) stand out. Positions come
// from data/fates.js (finishMarkers, placeMarkers); labels that would run
// into another are left out (the axis shows the flag, its tooltip the label).

import { roundRect } from "./canvas.js";
import { finishMarkers, placeMarkers } from "../data/fates.js";
import { textOn } from "./colors.js";

/** @typedef {import("./draw.js").Painter} Painter */
/** @typedef {import("./draw.js").Scene} Scene */
/** @typedef {import("../data/fates.js").PlacedMarker} PlacedMarker */

/**
 * The marker's colour on a theme.
 * @param {{dark: boolean}} theme
 */
export function markerColor(theme) {
  return theme.dark ? "#39c0c2" : "#0b7f82";
}

/** @param {string} fontFamily */
const markerFont = (fontFamily) => `bold 11px ${fontFamily}`;

/**
 * The markers of a frame, placed on its axis (labels measured with the painter).
 * @param {Painter} painter
 * @param {Scene} scene
 * @returns {PlacedMarker[]}
 */
export function placedMarkers(painter, scene) {
  const { d: data, g: geometry, theme } = scene;
  const markers = finishMarkers(data.meta.ledger, data.meta.t0);
  if (!markers.length) return [];
  const font = markerFont(theme.font);
  return placeMarkers(markers, geometry, (text) => painter.textWidth(font, text) + 10, data.meta.rollouts);
}

/**
 * Dashed lines down through the rows at each marker (drawn in the plot's clip, over the bars).
 * @param {Painter} painter
 * @param {Scene} scene
 */
export function paintFinishLines(painter, scene) {
  const placed = placedMarkers(painter, scene);
  painter.finishPlaced = placed;
  if (!placed.length) return;
  const { ctx } = painter;
  ctx.save();
  ctx.strokeStyle = markerColor(scene.theme);
  ctx.globalAlpha = 0.75;
  ctx.lineWidth = 1.5;
  ctx.setLineDash([5, 4]);
  ctx.beginPath();
  for (const item of placed) {
    const x = Math.round(item.x) + 0.5;
    ctx.moveTo(x, scene.g.axisH);
    ctx.lineTo(x, painter.h);
  }
  ctx.stroke();
  ctx.restore();
}

/**
 * The flags and labels on the axis (drawn in the axis' clip, under the cursor's pill).
 * @param {Painter} painter
 * @param {Scene} scene
 * @param {number} axisH height of the axis (above the load tracks)
 */
export function paintFinishFlags(painter, scene, axisH) {
  const placed = painter.finishPlaced || [];
  if (!placed.length) return;
  const { ctx } = painter;
  const color = markerColor(scene.theme);
  ctx.save();
  ctx.font = markerFont(scene.theme.font);
  ctx.textBaseline = "middle";
  for (const item of placed) {
    ctx.fillStyle = color;
    ctx.beginPath();
    ctx.moveTo(item.x - 5, axisH - 8);
    ctx.lineTo(item.x + 5, axisH - 8);
    ctx.lineTo(item.x, axisH - 1);
    ctx.closePath();
    ctx.fill();
    ctx.fillRect(Math.round(item.x) - 1, 2, 2, axisH - 9);
    if (Number.isNaN(item.labelX)) continue;
    ctx.fillStyle = color;
    ctx.beginPath();
    roundRect(ctx, item.labelX, 3, item.labelW, axisH - 8, 4);
    ctx.fill();
    ctx.fillStyle = textOn(color);
    ctx.fillText(item.text, item.labelX + 5, axisH / 2 - 1);
  }
  ctx.restore();
}

/**
 * The marker whose flag is under canvas point (x, y) on the axis, or null.
 * @param {PlacedMarker[]} placed
 * @param {number} x
 * @param {number} y
 * @param {number} axisH
 * @returns {PlacedMarker|null}
 */
export function markerAt(placed, x, y, axisH) {
  if (!(y >= 0 && y <= axisH)) return null;
  let best = null;
  let bestDist = 7;
  for (const item of placed) {
    const inLabel = !Number.isNaN(item.labelX) && x >= item.labelX && x <= item.labelX + item.labelW;
    const dist = inLabel ? 0 : Math.abs(x - item.x);
    if (dist < bestDist) {
      best = item;
      bestDist = dist;
    }
  }
  return best;
}
