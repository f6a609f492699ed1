// The engine band of a collapsed row: a strip a few px high in the row's bottom
// padding, under the sample's own bars (never over them), coloured by engine
// phase (queue, prefill, decode, PD, other). It draws the sample's partition of
// engine time by the rules the figures count (data/engine_partition.js): one phase
// an instant, none where no slice runs; under a query or a filter, the partition
// of the slices still shown (a hidden slice gives its time to those that ran
// beside it), faint where only dimmed ones run. Only visible collapsed rows and
// the visible time window are touched, the pieces merged below a pixel as the bars
// are; a sample's pieces are made the first time it is drawn under a visibility
// and kept until the visibility changes.

import { bandBox } from "../data/layout.js";
import { shownPieces } from "../data/engine_partition.js";
import { mergeLane } from "./lod.js";
import { canvasY } from "./hit.js";
import { enginePhaseColor } from "./colors.js";
import { grown } from "../util/arrays.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../data/engine_partition.js").BandPieces} BandPieces */

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
    /** @type {Data|null} the data `pieces` were made from */
    this.piecesData = null;
    /** @type {Uint8Array|null} the visibility `pieces` were made under */
    this.piecesVis = null;
    /** @type {Map<number, BandPieces>} sample -> its band's pieces */
    this.pieces = new Map();
  }

  /**
   * The band's pieces of `sample` under `vis`, made on its first draw under that
   * visibility (a new `vis` is a new visibility: the filters make a new array when
   * they change) and kept, so a frame only merges them.
   * @param {Data} data
   * @param {Uint8Array} vis
   * @param {number} sample
   * @returns {BandPieces}
   */
  shownPieces(data, vis, sample) {
    if (this.piecesData !== data || this.piecesVis !== vis) {
      this.piecesData = data;
      this.piecesVis = vis;
      this.pieces.clear();
    }
    let pieces = this.pieces.get(sample);
    if (!pieces) this.pieces.set(sample, (pieces = shownPieces(data, sample, vis)));
    return pieces;
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
      const pieces = this.shownPieces(data, vis, sample);
      if (!pieces.n) continue;
      const box = bandBox(layout, row);
      const y = canvasY(geometry, box.y);
      runs.reset();
      mergeLane(pieces.start, pieces.end, pieces.end, null, 0, pieces.n, sc, runs);
      for (let j = 0; j < runs.n; j++) {
        const piece = runs.span[j];
        rects.push(runs.x0[j], y, runs.x1[j] - runs.x0[j], box.h, pieces.code[piece] * 2 + pieces.dim[piece]);
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
