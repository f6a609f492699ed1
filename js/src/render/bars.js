// The bar pass of a frame (draw.js runs it after the row backgrounds, before
// the engine band): each visible lane's spans merged below a pixel (lod.js),
// PD phases with their segments, labels on bars wide enough to hold one, then
// the marks of open and failed spans. Fills are drawn grouped by layer, then
// colour, and each layer's labels over its own fills.

import { F_OPEN, F_ERROR, F_VIRTUAL, F_ENGINE, LK_SPANS, LK_VIRTUAL, nameOf } from "../data/decode.js";
import { LANE_OWN, LANE_BAND } from "../data/engine_lanes.js";
import { ROW_PAD, laneGap } from "../data/layout.js";
import { mergeLane } from "./lod.js";
import { xOf, canvasY, pdBand } from "./hit.js";
import { V_SPAN, V_SPAN_DIM, V_SEG, V_SEG_DIM, V_OPEN, V_OPEN_DIM } from "./colors.js";
import { grown } from "../util/arrays.js";

/** @typedef {import("./draw.js").Scene} Scene */
/** @typedef {import("./lod.js").TimeScale} TimeScale */
/** @typedef {import("./lod.js").RunBuffer} RunBuffer */
/** @typedef {{fit: (font: string, text: string, maxW: number) => string}} TextFitter */

/** Layers: collapsed depth 0..7, PD band on top. */
const N_LAYERS = 9;
const PD_LAYER = 8;
/** Bars narrower than this (px) carry no label. */
const MIN_LABEL_W = 28;

/**
 * What one frame's bar pass reads, worked out once per frame.
 * @typedef {Object} BarFrame
 * @property {Scene} scene
 * @property {TimeScale} sc
 * @property {number} barH bar height (px)
 * @property {number} nStyles
 * @property {number} maxName the last name with a colour of its own
 * @property {boolean} labelOk bars are tall enough for text
 */

/** Rectangles of one frame, later drawn grouped by (layer, style). */
class RectBatch {
  constructor(cap = 8192) {
    this.x = new Float32Array(cap);
    this.y = new Float32Array(cap);
    this.w = new Float32Array(cap);
    this.h = new Float32Array(cap);
    this.key = new Uint32Array(cap);
    this.n = 0;
    this.order = new Uint32Array(cap);
    this.counts = new Uint32Array(1);
  }
  /**
   * @param {number} x
   * @param {number} y
   * @param {number} width
   * @param {number} height
   * @param {number} key
   */
  push(x, y, width, height, key) {
    if (this.n === this.x.length) this.grow();
    const index = this.n++;
    this.x[index] = x;
    this.y[index] = y;
    this.w[index] = width;
    this.h[index] = height;
    this.key[index] = key;
  }
  grow() {
    this.x = grown(this.x);
    this.y = grown(this.y);
    this.w = grown(this.w);
    this.h = grown(this.h);
    this.key = grown(this.key);
    this.order = new Uint32Array(this.x.length);
  }
  /**
   * Counting sort by key; returns bucket starts (length nKeys + 1).
   * @param {number} nKeys
   */
  sort(nKeys) {
    if (this.counts.length < nKeys + 1) this.counts = new Uint32Array(nKeys + 1);
    const counts = this.counts;
    counts.fill(0, 0, nKeys + 1);
    for (let i = 0; i < this.n; i++) counts[this.key[i] + 1]++;
    for (let key = 0; key < nKeys; key++) counts[key + 1] += counts[key];
    const pos = counts.slice(0, nKeys + 1);
    for (let i = 0; i < this.n; i++) this.order[pos[this.key[i]]++] = i;
    return counts;
  }
}

/** Labels of one frame: box, span or segment id, layer and style key. */
class LabelList {
  constructor(cap = 1024) {
    this.x = new Float32Array(cap);
    this.y = new Float32Array(cap);
    this.w = new Float32Array(cap);
    this.h = new Float32Array(cap);
    this.id = new Int32Array(cap);
    this.layer = new Uint8Array(cap);
    this.key = new Uint32Array(cap);
    this.seg = new Uint8Array(cap);
    this.n = 0;
  }
  /**
   * @param {number} x
   * @param {number} y
   * @param {number} width
   * @param {number} height
   * @param {number} id span, or segment when `seg` is 1
   * @param {number} layer
   * @param {number} key
   * @param {number} seg
   */
  push(x, y, width, height, id, layer, key, seg) {
    if (this.n === this.x.length) {
      for (const field of /** @type {const} */ (["x", "y", "w", "h", "id", "layer", "key", "seg"])) {
        /** @type {any} */ (this)[field] = grown(this[field]);
      }
    }
    const index = this.n++;
    this.x[index] = x;
    this.y[index] = y;
    this.w[index] = width;
    this.h[index] = height;
    this.id[index] = id;
    this.layer[index] = layer;
    this.key[index] = key;
    this.seg[index] = seg;
  }
  /** Label indices ordered by layer (stable: they were pushed in row order). */
  byLayer() {
    /** @type {number[]} */
    const out = [];
    for (let layer = 0; layer < N_LAYERS; layer++) for (let i = 0; i < this.n; i++) if (this.layer[i] === layer) out.push(i);
    return out;
  }
}

export class BarPass {
  /** @param {RunBuffer} runs the painter's merge buffer (the engine band uses it too) */
  constructor(runs) {
    this.runs = runs;
    this.rects = new RectBatch(8192);
    this.labels = new LabelList(1024);
    /** @type {number[]} open spans: x, y, w, h, name */
    this.opens = [];
    /** @type {number[]} error spans: x, y, w, h */
    this.errs = [];
    /** @type {Uint8Array|null} the visibility `ownVis` was made from */
    this.ownVisOf = null;
    this.ownVis = new Uint8Array(0);
  }

  /**
   * `vis` with the engine's spans hidden: what a collapsed row's bars draw of a lane
   * holding both the sample's own spans and the engine's (made once per `vis`).
   * @param {import("../data/decode.js").Data} data
   * @param {Uint8Array} vis
   */
  ownVisibility(data, vis) {
    if (this.ownVisOf !== vis) {
      this.ownVisOf = vis;
      this.ownVis = vis.slice();
      for (let i = 0; i < data.nSpans; i++) if (data.spanFlags[i] & F_ENGINE) this.ownVis[i] = 0;
    }
    return this.ownVis;
  }

  /**
   * Paint the bars of rows `r0`..`r1` (the caller clips to the plot).
   * @param {CanvasRenderingContext2D} ctx
   * @param {TextFitter} text
   * @param {Scene} scene
   * @param {number} r0
   * @param {number} r1
   * @param {TimeScale} sc
   */
  paint(ctx, text, scene, r0, r1, sc) {
    const laneH = scene.L.laneH;
    const barH = laneH - laneGap(laneH);
    /** @type {BarFrame} */
    const frame = { scene, sc, barH, nStyles: scene.colors.nStyles, maxName: scene.colors.nNames - 1, labelOk: barH >= 11 };
    this.collect(frame, r0, r1);
    this.fill(ctx, text, frame);
    paintOpenMarks(ctx, scene, this.opens);
    paintErrorMarks(ctx, scene.theme, this.errs);
  }

  /**
   * Every drawable lane of the rows: its bars, labels and marks into the batches.
   * @param {BarFrame} frame
   * @param {number} r0
   * @param {number} r1
   */
  collect(frame, r0, r1) {
    const { d: data, L: layout, g: geometry, vis } = frame.scene;
    this.rects.n = 0;
    this.labels.n = 0;
    this.opens.length = 0;
    this.errs.length = 0;
    for (let row = r0; row < r1; row++) {
      const sample = layout.rows[row];
      const ex = layout.expanded[row] === 1;
      const top = canvasY(geometry, layout.rowTop[row]) + ROW_PAD;
      const base = data.laneBase[sample];
      for (let laneIndex = 0; laneIndex < data.nLanes[sample]; laneIndex++) {
        const slot = base + laneIndex;
        if (!(data.laneKind[slot] & (LK_SPANS | LK_VIRTUAL))) continue;
        // A collapsed row draws the sample's own spans; the engine's go to its band.
        const mix = data.laneMix[slot];
        if (!ex && !(mix & LANE_OWN)) continue;
        const laneVis = !ex && mix & LANE_BAND ? this.ownVisibility(data, vis) : vis;
        this.collectLane(frame, slot, ex ? top + laneIndex * layout.laneH : top, ex, laneVis);
      }
    }
  }

  /**
   * One lane's spans merged into runs; each run a bar (or a PD phase) in the batches.
   * @param {BarFrame} frame
   * @param {number} slot the lane's slot
   * @param {number} y the bar's top (px)
   * @param {boolean} ex the row is expanded
   * @param {Uint8Array} laneVis
   */
  collectLane(frame, slot, y, ex, laneVis) {
    const data = frame.scene.d;
    const runs = this.runs;
    runs.reset();
    mergeLane(data.spanStart, data.spanEnd, data.spanEndMax, laneVis, data.laneSpanOff[slot], data.laneSpanOff[slot + 1], frame.sc, runs);
    for (let j = 0; j < runs.n; j++) {
      const span = runs.span[j];
      const x0 = runs.x0[j];
      const width = runs.x1[j] - x0;
      const single = runs.count[j] === 1;
      if (data.spanFlags[span] & F_VIRTUAL) this.pushPhase(frame, span, x0, width, y, ex, single);
      else this.pushSpan(frame, span, x0, width, y, ex, single);
    }
  }

  /**
   * A span's bar, its open and error marks and (a leaf's, when it fits) its label.
   * @param {BarFrame} frame
   * @param {number} span
   * @param {number} x0
   * @param {number} width
   * @param {number} y
   * @param {boolean} ex
   * @param {boolean} single the run is this one span (not several merged)
   */
  pushSpan(frame, span, x0, width, y, ex, single) {
    const { scene, barH, nStyles } = frame;
    const { d: data, colors } = scene;
    const fl = data.spanFlags[span];
    const dim = scene.vis[span] === 2;
    const nm = Math.min(data.spanName[span], frame.maxName);
    const layer = ex ? 0 : scene.raiseShown && !dim ? 7 : Math.min(data.spanDepth[span], 6);
    const open = single && fl & F_OPEN;
    const variant = open ? (dim ? V_OPEN_DIM : V_OPEN) : dim ? V_SPAN_DIM : V_SPAN;
    const key = layer * nStyles + colors.style(nm, variant);
    this.rects.push(x0, y, width, barH, key);
    if (!single) return;
    if (open) this.opens.push(x0, y, width, barH, nm);
    if (fl & F_ERROR) this.errs.push(x0, y, width, barH);
    // Collapsed rows overlay children on parents: label leaves only.
    if (frame.labelOk && width >= MIN_LABEL_W && (ex || !(data.spanHasChild[span] & 1))) {
      // Keep the text clear of the PD band a collapsed generation bar carries.
      const lh = !ex && data.spanHasChild[span] & 2 ? barH - pdBand({ y: 0, h: barH }, 1).h * 2 : barH;
      this.labels.push(x0, y, width, lh, span, layer, key, 0);
    }
  }

  /**
   * A PD phase: its own lane when expanded, a thin band when collapsed; its
   * segments drawn one by one when the phase is a single run wide enough,
   * else one bar coloured as its longest segment.
   * @param {BarFrame} frame
   * @param {number} span
   * @param {number} x0
   * @param {number} width
   * @param {number} y
   * @param {boolean} ex
   * @param {boolean} single
   */
  pushPhase(frame, span, x0, width, y, ex, single) {
    const { scene, barH, nStyles } = frame;
    const { d: data, g: geometry, colors } = scene;
    const dim = scene.vis[span] === 2;
    const band = ex ? { y, h: barH } : pdBand({ y, h: barH }, data.spanPd[span]);
    const layer = ex ? 0 : PD_LAYER;
    const sLo = data.spanSegOff[span];
    const sHi = data.spanSegOff[span + 1];
    if (!(single && width >= 3 && sHi > sLo)) {
      this.rects.push(x0, band.y, width, band.h, layer * nStyles + phaseStyle(frame, span, dim));
      return;
    }
    const leftLimit = geometry.plotX - 2;
    const rightLimit = geometry.plotX + geometry.plotW + 2;
    for (let orderIndex = sLo; orderIndex < sHi; orderIndex++) {
      const sg = data.segOrder[orderIndex];
      const left = Math.max(xOf(geometry, data.segStart[sg]), leftLimit);
      const right = Math.min(xOf(geometry, data.segEnd[sg]), rightLimit);
      if (right < leftLimit || left > rightLimit) continue;
      const key = layer * nStyles + colors.style(data.segName[sg], dim ? V_SEG_DIM : V_SEG);
      this.rects.push(left, band.y, Math.max(0.6, right - left), band.h, key);
      if (ex && frame.labelOk && right - left >= MIN_LABEL_W) this.labels.push(left, band.y, right - left, band.h, sg, layer, key, 1);
    }
  }

  /**
   * The batched bars drawn by layer, then style; each layer's labels after its fills.
   * @param {CanvasRenderingContext2D} ctx
   * @param {TextFitter} text
   * @param {BarFrame} frame
   */
  fill(ctx, text, frame) {
    const { rects, labels } = this;
    const { nStyles, scene } = frame;
    const starts = rects.sort(N_LAYERS * nStyles);
    const font = `${frame.barH >= 15 ? 11 : 10}px ${scene.theme.font}`;
    const order = labels.byLayer();
    let next = 0;
    for (let layer = 0; layer < N_LAYERS; layer++) {
      for (let st = 0; st < nStyles; st++) {
        const key = layer * nStyles + st;
        if (starts[key] === starts[key + 1]) continue;
        ctx.fillStyle = scene.colors.fills[st];
        ctx.beginPath();
        for (let orderIndex = starts[key]; orderIndex < starts[key + 1]; orderIndex++) {
          const rectIndex = rects.order[orderIndex];
          ctx.rect(rects.x[rectIndex], rects.y[rectIndex], rects.w[rectIndex], rects.h[rectIndex]);
        }
        ctx.fill();
      }
      if (next < order.length && labels.layer[order[next]] === layer) {
        ctx.font = font;
        ctx.textBaseline = "middle";
        while (next < order.length && labels.layer[order[next]] === layer) this.paintLabel(ctx, text, frame, font, order[next++]);
      }
    }
  }

  /**
   * One label, cut to the part of its bar inside the plot.
   * @param {CanvasRenderingContext2D} ctx
   * @param {TextFitter} text
   * @param {BarFrame} frame
   * @param {string} font
   * @param {number} labelIndex
   */
  paintLabel(ctx, text, frame, font, labelIndex) {
    const labels = this.labels;
    const { d: data, g: geometry, colors } = frame.scene;
    const id = labels.id[labelIndex];
    const name = nameOf(data, labels.seg[labelIndex] ? data.segName[id] : data.spanName[id]);
    let x = labels.x[labelIndex];
    let width = labels.w[labelIndex];
    if (x < geometry.plotX) {
      width -= geometry.plotX - x;
      x = geometry.plotX;
    }
    if (x + width > geometry.plotX + geometry.plotW) width = geometry.plotX + geometry.plotW - x;
    const txt = text.fit(font, name, width - 8);
    if (!txt) return;
    ctx.fillStyle = colors.text[labels.key[labelIndex] % frame.nStyles];
    ctx.fillText(txt, x + 4, labels.y[labelIndex] + labels.h[labelIndex] / 2 + 0.5);
  }
}

/**
 * The style of a PD phase drawn as one bar: its longest segment's, else its own name's.
 * @param {BarFrame} frame
 * @param {number} span
 * @param {boolean} dim
 */
function phaseStyle(frame, span, dim) {
  const { d: data, colors } = frame.scene;
  let longestName = -1;
  let best = -1;
  for (let orderIndex = data.spanSegOff[span]; orderIndex < data.spanSegOff[span + 1]; orderIndex++) {
    const sg = data.segOrder[orderIndex];
    const duration = data.segEnd[sg] - data.segStart[sg];
    if (duration > best) {
      best = duration;
      longestName = data.segName[sg];
    }
  }
  if (longestName >= 0) return colors.style(longestName, dim ? V_SEG_DIM : V_SEG);
  return colors.style(Math.min(data.spanName[span], frame.maxName), dim ? V_SPAN_DIM : V_SPAN);
}

/**
 * Open spans: a dashed outline to the display end and a zig-zag "torn" end
 * (the span was cut there, not finished).
 * @param {CanvasRenderingContext2D} ctx
 * @param {Scene} scene
 * @param {number[]} opens x, y, w, h, name per span
 */
function paintOpenMarks(ctx, scene, opens) {
  if (!opens.length) return;
  ctx.save();
  ctx.setLineDash([4, 3]);
  ctx.lineWidth = 1.25;
  for (let offset = 0; offset < opens.length; offset += 5) {
    ctx.strokeStyle = scene.colors.base(opens[offset + 4]);
    ctx.strokeRect(opens[offset] + 0.5, opens[offset + 1] + 0.5, Math.max(0, opens[offset + 2] - 1), opens[offset + 3] - 1);
  }
  ctx.setLineDash([]);
  ctx.strokeStyle = scene.theme.fg1;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  for (let offset = 0; offset < opens.length; offset += 5) {
    const x = opens[offset] + opens[offset + 2];
    const y = opens[offset + 1];
    const height = opens[offset + 3];
    const zigzag = Math.min(3, height / 4);
    ctx.moveTo(x, y);
    ctx.lineTo(x - zigzag, y + height / 4);
    ctx.lineTo(x, y + height / 2);
    ctx.lineTo(x - zigzag, y + (3 * height) / 4);
    ctx.lineTo(x, y + height);
  }
  ctx.stroke();
  ctx.restore();
}

/**
 * Failed spans: an error-coloured strip along the bar's foot.
 * @param {CanvasRenderingContext2D} ctx
 * @param {import("../ui/theme.js").Theme} theme
 * @param {number[]} errs x, y, w, h per span
 */
function paintErrorMarks(ctx, theme, errs) {
  if (!errs.length) return;
  ctx.fillStyle = theme.error;
  ctx.beginPath();
  for (let offset = 0; offset < errs.length; offset += 4) {
    const height = errs[offset + 3];
    const thickness = Math.max(2, Math.min(3, height / 5));
    ctx.rect(errs[offset], errs[offset + 1] + height - thickness, errs[offset + 2], thickness);
  }
  ctx.fill();
}
