// The engine band of a collapsed row: a strip a few px high in the row's bottom
// padding, under the sample's own bars (never over them), coloured by engine
// phase (queue, prefill, decode, PD, other). It draws the sample's partition of
// engine time, the pieces the figures count (data/engine_partition.js): one phase
// an instant, none where no slice runs. Only visible collapsed rows and the
// visible time window are touched, the pieces merged below a pixel as the bars
// are; a sample's pieces are made the first time it is drawn and kept.

import { bandBox } from "../data/layout.js";
import { samplePieces } from "../data/engine_partition.js";
import { mergeLane } from "./lod.js";
import { canvasY } from "./hit.js";
import { enginePhaseColor } from "./colors.js";
import { grown } from "../util/arrays.js";

/** @typedef {import("../data/decode.js").Data} Data */

/** Rectangles of the band, bucketed by (phase code, dimmed). */
class BandRects {
  constructor(cap = 1024) {
    this.x = new Float32Array(cap);
    this.y = new Float32Array(cap);
    this.w = new Float32Array(cap);
    this.h = new Float32Array(cap);
    this.key = new Uint16Array(cap);
    this.n = 0;
  }
  /**
   * @param {number} x
   * @param {number} y
   * @param {number} w
   * @param {number} h
   * @param {number} key
   */
  push(x, y, w, h, key) {
    if (this.n === this.x.length) {
      this.x = grown(this.x);
      this.y = grown(this.y);
      this.w = grown(this.w);
      this.h = grown(this.h);
      this.key = grown(this.key);
    }
    const index = this.n++;
    this.x[index] = x;
    this.y[index] = y;
    this.w[index] = w;
    this.h[index] = h;
    this.key[index] = key;
  }
}

export class BandPainter {
  constructor() {
    this.rects = new BandRects();
    /** Band pieces painted in the last frame (a test hook). */
    this.drawn = 0;
  }

  /**
   * Paint the band of the visible collapsed rows [r0, r1).
   * @param {CanvasRenderingContext2D} ctx
   * @param {import("./draw.js").Scene} scene
   * @param {number} r0
   * @param {number} r1
   * @param {import("./lod.js").TimeScale} sc
   * @param {import("./lod.js").RunBuffer} runs scratch
   */
  paint(ctx, scene, r0, r1, sc, runs) {
    const { d: data, L: layout, g: geometry, vis } = scene;
    const rects = this.rects;
    rects.n = 0;
    this.drawn = 0;
    if (!data.hasEngine) return;
    for (let row = r0; row < r1; row++) {
      if (layout.expanded[row]) continue;
      const sample = layout.rows[row];
      const pieces = samplePieces(data, sample);
      if (!pieces.n) continue;
      const box = bandBox(layout, row);
      const y = canvasY(geometry, box.y);
      runs.reset();
      mergeLane(pieces.start, pieces.end, pieces.end, vis, 0, pieces.n, sc, runs, 1, pieces.span);
      for (let j = 0; j < runs.n; j++) {
        const piece = runs.span[j];
        const dim = vis[pieces.span[piece]] === 2 ? 1 : 0;
        rects.push(runs.x0[j], y, runs.x1[j] - runs.x0[j], box.h, pieces.code[piece] * 2 + dim);
      }
    }
    this.drawn = rects.n;
    if (!rects.n) return;
    // The pieces are disjoint: one fill per phase, dimmed ones faint.
    for (let code = 1; code <= data.bandPhases.length; code++) {
      ctx.fillStyle = enginePhaseColor(data.bandPhases[code - 1]);
      for (const dim of [0, 1]) {
        const key = code * 2 + dim;
        ctx.globalAlpha = dim ? 0.3 : 1;
        ctx.beginPath();
        let any = false;
        for (let i = 0; i < rects.n; i++) {
          if (rects.key[i] !== key) continue;
          ctx.rect(rects.x[i], rects.y[i], Math.max(0.75, rects.w[i]), rects.h[i]);
          any = true;
        }
        if (any) ctx.fill();
      }
    }
    ctx.globalAlpha = 1;
  }
}
