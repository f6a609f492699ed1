// The event pass of a frame (draw.js runs it after the bars and the engine
// band): each visible lane's instant events as diamonds, clusters of events
// closer than a few pixels as a pill with their count, and unmatched span ends
// as a red end bracket with a flag, distinct from events.

import { EV_INSTANT, EV_UNMATCHED } from "../data/decode.js";
import { barBox } from "../data/layout.js";
import { ClusterBuffer, EventScratch } from "./lod.js";
import { canvasY, markerGeom, rowEventClusters } from "./hit.js";
import { V_SPAN, V_SPAN_DIM, mix } from "./colors.js";
import { roundRect } from "./canvas.js";

/** @typedef {import("./draw.js").Scene} Scene */
/** @typedef {import("./lod.js").TimeScale} TimeScale */
/** @typedef {import("../ui/theme.js").Theme} Theme */
/** @typedef {{textWidth: (font: string, text: string) => number}} TextMeasure */

/**
 * The marks of one frame, batched for drawing.
 * @typedef {Object} EventBatch
 * @property {Map<string, number[]>} diamonds fill -> x, y, r per event
 * @property {number[]} badges x, y, r, count, first event per cluster
 * @property {number[]} unmatched x, top, height, count per cluster of unmatched ends
 */

export class EventMarks {
  constructor() {
    this.scratch = new EventScratch(512);
    this.clusters = new ClusterBuffer(512);
  }

  /**
   * Paint the events of rows `r0`..`r1` (the caller clips to the plot).
   * @param {CanvasRenderingContext2D} ctx
   * @param {TextMeasure} text
   * @param {Scene} scene
   * @param {number} r0
   * @param {number} r1
   * @param {TimeScale} sc
   */
  paint(ctx, text, scene, r0, r1, sc) {
    if (scene.d.nEvents === 0) return;
    const batch = this.collect(scene, r0, r1, sc);
    paintDiamonds(ctx, scene.theme, batch.diamonds);
    paintBadges(ctx, text, scene.theme, batch.badges);
    paintUnmatchedEnds(ctx, scene.theme, batch.unmatched);
  }

  /**
   * @param {Scene} scene
   * @param {number} r0
   * @param {number} r1
   * @param {TimeScale} sc
   * @returns {EventBatch}
   */
  collect(scene, r0, r1, sc) {
    const { d: data, L: layout, g: geometry, evVis, colors } = scene;
    /** @type {EventBatch} */
    const batch = { diamonds: new Map(), badges: [], unmatched: [] };
    const clusters = this.clusters;
    for (let row = r0; row < r1; row++) {
      const sample = layout.rows[row];
      if (data.evOff[sample + 1] === data.evOff[sample]) continue;
      const ex = layout.expanded[row] === 1;
      const lanes = ex ? data.nLanes[sample] : 1;
      for (let laneIndex = 0; laneIndex < lanes; laneIndex++) {
        const slot = data.laneBase[sample] + laneIndex;
        if (ex && data.laneEvOff[slot] === data.laneEvOff[slot + 1]) continue;
        const box = barBox(layout, row, ex ? laneIndex : 0);
        const marker = markerGeom(box);
        const cy = canvasY(geometry, marker.cy);
        for (const kind of [EV_INSTANT, EV_UNMATCHED]) {
          rowEventClusters(data, sample, ex ? laneIndex : -1, sc, evVis, kind, this.scratch, clusters);
          for (let cluster = 0; cluster < clusters.n; cluster++) {
            const x = clusters.x[cluster];
            const ev = clusters.first[cluster];
            const count = clusters.count[cluster];
            if (kind === EV_UNMATCHED) batch.unmatched.push(x, canvasY(geometry, box.y), box.h, count);
            else if (count > 1) batch.badges.push(x, cy, marker.r, count, ev);
            else {
              const fill = colors.fills[colors.style(data.evName[ev], evVis[ev] === 2 ? V_SPAN_DIM : V_SPAN)];
              const diamonds = batch.diamonds.get(fill);
              if (diamonds) diamonds.push(x, cy, marker.r);
              else batch.diamonds.set(fill, [x, cy, marker.r]);
            }
          }
        }
      }
    }
    return batch;
  }
}

/**
 * Instant events: diamonds with a background-coloured rim, batched by colour.
 * @param {CanvasRenderingContext2D} ctx
 * @param {Theme} theme
 * @param {Map<string, number[]>} byFill
 */
function paintDiamonds(ctx, theme, byFill) {
  ctx.lineWidth = 1;
  ctx.strokeStyle = theme.bg;
  for (const [fill, diamonds] of byFill) {
    ctx.fillStyle = fill;
    ctx.beginPath();
    for (let offset = 0; offset < diamonds.length; offset += 3) {
      const x = diamonds[offset];
      const y = diamonds[offset + 1];
      const rr = diamonds[offset + 2];
      ctx.moveTo(x, y - rr);
      ctx.lineTo(x + rr, y);
      ctx.lineTo(x, y + rr);
      ctx.lineTo(x - rr, y);
      ctx.closePath();
    }
    ctx.fill();
    ctx.stroke();
  }
}

/**
 * Clusters: a small grey pill with the count.
 * @param {CanvasRenderingContext2D} ctx
 * @param {TextMeasure} text
 * @param {Theme} theme
 * @param {number[]} badges
 */
function paintBadges(ctx, text, theme, badges) {
  if (!badges.length) return;
  const badgeFill = mix(theme.fg1, theme.bg, 0.28);
  const font = `bold 8px ${theme.font}`;
  ctx.font = font;
  ctx.textAlign = "center";
  ctx.textBaseline = "middle";
  ctx.lineWidth = 1;
  for (let offset = 0; offset < badges.length; offset += 5) {
    const x = badges[offset];
    const y = badges[offset + 1];
    const rr = badges[offset + 2] + 1;
    const count = badges[offset + 3];
    const label = count > 99 ? "99+" : String(count);
    const showText = rr >= 4;
    const width = showText ? Math.max(rr * 2, text.textWidth(font, label) + 5) : rr * 2;
    ctx.fillStyle = badgeFill;
    ctx.strokeStyle = theme.bg;
    ctx.beginPath();
    roundRect(ctx, x - width / 2, y - rr, width, rr * 2, rr);
    ctx.fill();
    ctx.stroke();
    if (showText) {
      ctx.fillStyle = theme.bg;
      ctx.fillText(label, x, y + 0.5);
    }
  }
  ctx.textAlign = "left";
}

/**
 * Unmatched ends: a red end bracket "]" with a flag, and the count when more than one.
 * @param {CanvasRenderingContext2D} ctx
 * @param {Theme} theme
 * @param {number[]} unmatched
 */
function paintUnmatchedEnds(ctx, theme, unmatched) {
  if (!unmatched.length) return;
  ctx.strokeStyle = theme.error;
  ctx.fillStyle = theme.error;
  ctx.lineWidth = 2;
  ctx.beginPath();
  for (let offset = 0; offset < unmatched.length; offset += 4) {
    const x = Math.round(unmatched[offset]);
    const y = unmatched[offset + 1];
    const height = unmatched[offset + 2];
    ctx.moveTo(x - 4, y + 1);
    ctx.lineTo(x, y + 1);
    ctx.lineTo(x, y + height - 1);
    ctx.lineTo(x - 4, y + height - 1);
  }
  ctx.stroke();
  ctx.beginPath();
  for (let offset = 0; offset < unmatched.length; offset += 4) {
    const x = Math.round(unmatched[offset]);
    const y = unmatched[offset + 1];
    ctx.moveTo(x, y - 1);
    ctx.lineTo(x + 5, y + 2);
    ctx.lineTo(x, y + 5);
    ctx.closePath();
  }
  ctx.fill();
  ctx.font = `bold 9px ${theme.font}`;
  ctx.textBaseline = "middle";
  for (let offset = 0; offset < unmatched.length; offset += 4) {
    if (unmatched[offset + 3] > 1) ctx.fillText(`×${unmatched[offset + 3]}`, unmatched[offset] + 6, unmatched[offset + 1] + unmatched[offset + 2] / 2 + 2);
  }
}
