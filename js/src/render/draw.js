// Canvas painting of the timeline: row backgrounds, spans (batched by colour,
// merged below a pixel), PD phases, open and unmatched markers, event markers
// and cluster badges, cursor, brush range, selection; band.js the engine band of
// collapsed rows, margins.js the label gutter and the time axis. Only visible rows and the visible time window are
// touched. Box geometry (what is drawn where) lives in hit.js.

import { sizeCanvas, roundRect } from "./canvas.js";
import { paintGutter, paintAxis } from "./margins.js";
import { rowFill } from "./fate_rows.js";
import { paintFinishLines } from "./finish_marker.js";
import { F_OPEN, F_ERROR, F_VIRTUAL, F_ENGINE, LK_SPANS, LK_VIRTUAL, EV_INSTANT, EV_UNMATCHED, nameOf } from "../data/decode.js";
import { LANE_OWN, LANE_BAND } from "../data/engine_lanes.js";
import { BandPainter } from "./band.js";
import { paintTracks } from "./tracks.js";
import { ROW_PAD, laneGap, barBox, visibleRows } from "../data/layout.js";
import { RunBuffer, ClusterBuffer, EventScratch, mergeLane } from "./lod.js";
import { scaleOf, xOf, canvasY, pdBand, markerGeom, rowEventClusters, hitBox } from "./hit.js";
import { V_SPAN, V_SPAN_DIM, V_SEG, V_SEG_DIM, V_OPEN, V_OPEN_DIM, mix } from "./colors.js";
import { niceStep } from "../util/format.js";
import { grown } from "../util/arrays.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../data/layout.js").Layout} Layout */
/** @typedef {import("./hit.js").Geo} Geo */
/** @typedef {import("./hit.js").Hit} Hit */
/** @typedef {import("../ui/theme.js").Theme} Theme */
/** @typedef {import("./colors.js").ColorTable} ColorTable */

/** Layers: collapsed depth 0..7, PD band on top. */
const N_LAYERS = 9;
const PD_LAYER = 8;

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

/**
 * @typedef {Object} Scene
 * @property {Data} d
 * @property {Layout} L
 * @property {Geo} g
 * @property {Uint8Array} vis
 * @property {Uint8Array} evVis
 * @property {Theme} theme
 * @property {ColorTable} colors
 * @property {number} cursor NaN for none
 * @property {[number, number]|null} brush
 * @property {Hit|null} selection
 * @property {Hit|null} hover
 * @property {number} hoverRow -1 for none
 * @property {number} selRow -1 for none
 * @property {boolean} raiseShown draw undimmed spans of collapsed rows on top (legend highlight)
 * @property {boolean} loadSplit the load tracks one per engine (else summed)
 * @property {import("./fate_rows.js").FateFills|null} [fates] rows coloured by fate (fate_rows.js), null: by span
 */

export class Painter {
  /** @param {HTMLCanvasElement} canvas */
  constructor(canvas) {
    this.canvas = canvas;
    const ctx = canvas.getContext("2d", { alpha: false });
    if (!ctx) throw new Error("canvas 2d context unavailable");
    this.ctx = ctx;
    this.w = 0;
    this.h = 0;
    this.dpr = 1;
    this.runs = new RunBuffer(4096);
    this.rects = new RectBatch(8192);
    this.scratch = new EventScratch(512);
    this.clusters = new ClusterBuffer(512);
    /** label list: x, y, w, h, span/seg id, layer, style key, isSeg */
    this.lab = { x: new Float32Array(1024), y: new Float32Array(1024), w: new Float32Array(1024), h: new Float32Array(1024), id: new Int32Array(1024), layer: new Uint8Array(1024), key: new Uint32Array(1024), seg: new Uint8Array(1024), n: 0 };
    /** @type {number[]} open spans: x, y, w, h, name */
    this.opens = [];
    /** @type {number[]} error spans: x, y, w, h */
    this.errs = [];
    /** @type {Map<string, Map<number, number>>} */
    this.widthCache = new Map();
    this.drawnRows = 0;
    this.badgeFill = "#444444";
    this.band = new BandPainter();
    /** @type {Uint8Array|null} the visibility `ownVis` was made from */
    this.ownVisOf = null;
    this.ownVis = new Uint8Array(0);
    /** @type {import("../data/fates.js").PlacedMarker[]} the 90%-finished markers of the last frame (finish_marker.js) */
    this.finishPlaced = [];
  }

  /**
   * `vis` with the engine's spans hidden: what a collapsed row's bars draw of a lane
   * holding both the sample's own spans and the engine's (made once per `vis`).
   * @param {Data} data
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
   * Size the backing store to CSS size × devicePixelRatio.
   * @param {number} width
   * @param {number} height
   * @param {number} dpr
   */
  resize(width, height, dpr) {
    sizeCanvas(this.canvas, width, height, dpr);
    this.w = width;
    this.h = height;
    this.dpr = dpr;
  }

  /**
   * Text width with a per-font cache keyed by string.
   * @param {string} font
   * @param {string} text
   */
  textWidth(font, text) {
    let widths = this.widthCache.get(font);
    if (!widths) {
      widths = new Map();
      this.widthCache.set(font, widths);
    }
    let width = widths.get(/** @type {any} */ (text));
    if (width === undefined) {
      this.ctx.font = font;
      width = this.ctx.measureText(text).width;
      if (widths.size > 5000) widths.clear();
      widths.set(/** @type {any} */ (text), width);
    }
    return width;
  }

  /**
   * `text` cut with an ellipsis to fit `maxW` px (binary search on length).
   * @param {string} font
   * @param {string} text
   * @param {number} maxW
   */
  fit(font, text, maxW) {
    if (maxW <= 4) return "";
    // No glyph is narrower than ~1 px at label sizes: a longer prefix can never
    // fit, and measuring (and caching) a multi-MB name would stall the frame.
    const longest = Math.ceil(maxW) + 1;
    if (text.length > longest) text = text.slice(0, longest);
    if (this.textWidth(font, text) <= maxW) return text;
    let lo = 0;
    let hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.textWidth(font, text.slice(0, mid) + "…") <= maxW) lo = mid;
      else hi = mid - 1;
    }
    // A label cut to one or two letters says nothing: leave the bar bare.
    return lo < 3 ? "" : text.slice(0, lo) + "…";
  }

  /** Clear the font-width cache (theme/font change). */
  resetTextCache() {
    this.widthCache.clear();
  }

  /**
   * Paint one frame.
   * @param {Scene} scene
   * @returns {number} rows painted
   */
  paint(scene) {
    const { ctx } = this;
    const { L: layout, g: geometry, theme } = scene;
    const width = this.w;
    const height = this.h;
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.fillStyle = theme.bg;
    ctx.fillRect(0, 0, width, height);

    const rowsTop = geometry.axisH;
    const rowsH = height - geometry.axisH;
    const [r0, r1] = visibleRows(layout, geometry.scrollTop, rowsH);
    this.drawnRows = r1 - r0;
    const sc = scaleOf(geometry);
    const step = niceStep(sc.pxPerSec, 96);
    const firstTick = Math.ceil(geometry.t0 / step) * step;

    // Row backgrounds.
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, rowsTop, width, rowsH);
    ctx.clip();
    for (let row = r0; row < r1; row++) {
      const y = canvasY(geometry, layout.rowTop[row]);
      const rowH = layout.rowTop[row + 1] - layout.rowTop[row];
      const bg = rowFill(scene, row);
      if (bg) {
        ctx.fillStyle = bg;
        ctx.fillRect(0, y, width, rowH);
      }
    }
    // Grid.
    ctx.strokeStyle = theme.border2;
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let tick = firstTick; tick <= geometry.t1; tick += step) {
      const x = Math.round(xOf(geometry, tick)) + 0.5;
      ctx.moveTo(x, rowsTop);
      ctx.lineTo(x, height);
    }
    ctx.stroke();
    ctx.restore();

    // Bars, PD phases, events: clipped to the plot.
    ctx.save();
    ctx.beginPath();
    ctx.rect(geometry.plotX, rowsTop, geometry.plotW, rowsH);
    ctx.clip();
    this.paintBars(scene, r0, r1, sc);
    this.band.paint(ctx, scene, r0, r1, sc, this.runs);
    this.paintEvents(scene, r0, r1, sc);
    this.paintOverlays(scene);
    ctx.restore();

    paintGutter(this, scene, r0, r1);
    paintTracks(this, scene, step, firstTick);
    paintAxis(this, scene, step, firstTick);
    return this.drawnRows;
  }

  /**
   * @param {Scene} scene
   * @param {number} r0
   * @param {number} r1
   * @param {import("./lod.js").TimeScale} sc
   */
  paintBars(scene, r0, r1, sc) {
    const { ctx, runs, rects, lab } = this;
    const { d: data, L: layout, g: geometry, vis, colors } = scene;
    rects.n = 0;
    lab.n = 0;
    this.opens.length = 0;
    this.errs.length = 0;
    const laneH = layout.laneH;
    const gap = laneGap(laneH);
    const barH = laneH - gap;
    const nStyles = colors.nStyles;
    const maxName = colors.nNames - 1;
    const labelOk = barH >= 11;
    const minLabelW = 28;
    for (let row = r0; row < r1; row++) {
      const sample = layout.rows[row];
      const ex = layout.expanded[row] === 1;
      const top = canvasY(geometry, layout.rowTop[row]) + ROW_PAD;
      const base = data.laneBase[sample];
      const nl = data.nLanes[sample];
      for (let laneIndex = 0; laneIndex < nl; laneIndex++) {
        const slot = base + laneIndex;
        const kind = data.laneKind[slot];
        if (!(kind & (LK_SPANS | LK_VIRTUAL))) continue;
        // A collapsed row draws the sample's own spans; the engine's go to its band.
        const mix = data.laneMix[slot];
        if (!ex && !(mix & LANE_OWN)) continue;
        const laneVis = !ex && mix & LANE_BAND ? this.ownVisibility(data, vis) : vis;
        const y = ex ? top + laneIndex * laneH : top;
        const lo = data.laneSpanOff[slot];
        const hi = data.laneSpanOff[slot + 1];
        runs.reset();
        mergeLane(data.spanStart, data.spanEnd, data.spanEndMax, laneVis, lo, hi, sc, runs);
        for (let j = 0; j < runs.n; j++) {
          const span = runs.span[j];
          const fl = data.spanFlags[span];
          const x0 = runs.x0[j];
          const width = runs.x1[j] - x0;
          const single = runs.count[j] === 1;
          const dim = vis[span] === 2;
          const nm = Math.min(data.spanName[span], maxName);
          if (fl & F_VIRTUAL) {
            // PD phase: its own lane when expanded, a thin band when collapsed.
            const pb = ex ? { y, h: barH } : pdBand({ y, h: barH }, data.spanPd[span]);
            const layer = ex ? 0 : PD_LAYER;
            const sLo = data.spanSegOff[span];
            const sHi = data.spanSegOff[span + 1];
            if (single && width >= 3 && sHi > sLo) {
              for (let orderIndex = sLo; orderIndex < sHi; orderIndex++) {
                const sg = data.segOrder[orderIndex];
                let left = xOf(geometry, data.segStart[sg]);
                let right = xOf(geometry, data.segEnd[sg]);
                if (right < geometry.plotX - 2 || left > geometry.plotX + geometry.plotW + 2) continue;
                if (left < geometry.plotX - 2) left = geometry.plotX - 2;
                if (right > geometry.plotX + geometry.plotW + 2) right = geometry.plotX + geometry.plotW + 2;
                const key = layer * nStyles + colors.style(data.segName[sg], dim ? V_SEG_DIM : V_SEG);
                rects.push(left, pb.y, Math.max(0.6, right - left), pb.h, key);
                if (ex && labelOk && right - left >= minLabelW) this.pushLabel(left, pb.y, right - left, pb.h, sg, layer, key, 1);
              }
            } else {
              let sn = -1;
              let best = -1;
              for (let orderIndex = sLo; orderIndex < sHi; orderIndex++) {
                const sg = data.segOrder[orderIndex];
                const du = data.segEnd[sg] - data.segStart[sg];
                if (du > best) {
                  best = du;
                  sn = data.segName[sg];
                }
              }
              const key = layer * nStyles + (sn >= 0 ? colors.style(sn, dim ? V_SEG_DIM : V_SEG) : colors.style(nm, dim ? V_SPAN_DIM : V_SPAN));
              rects.push(x0, pb.y, width, pb.h, key);
            }
            continue;
          }
          const layer = ex ? 0 : scene.raiseShown && !dim ? 7 : Math.min(data.spanDepth[span], 6);
          const open = single && fl & F_OPEN;
          const variant = open ? (dim ? V_OPEN_DIM : V_OPEN) : dim ? V_SPAN_DIM : V_SPAN;
          const key = layer * nStyles + colors.style(nm, variant);
          rects.push(x0, y, width, barH, key);
          if (single) {
            if (open) this.opens.push(x0, y, width, barH, nm);
            if (fl & F_ERROR) this.errs.push(x0, y, width, barH);
            // Collapsed rows overlay children on parents: label leaves only.
            if (labelOk && width >= minLabelW && (ex || !(data.spanHasChild[span] & 1))) {
              // Keep the text clear of the PD band a collapsed generation bar carries.
              const lh = !ex && data.spanHasChild[span] & 2 ? barH - pdBand({ y: 0, h: barH }, 1).h * 2 : barH;
              this.pushLabel(x0, y, width, lh, span, layer, key, 0);
            }
          }
        }
      }
    }
    // Draw grouped by layer, then style; labels after their layer's fills.
    const nKeys = N_LAYERS * nStyles;
    const starts = rects.sort(nKeys);
    const font = `${barH >= 15 ? 11 : 10}px ${scene.theme.font}`;
    let li = 0;
    // Labels are pushed in row order; sort them by layer for the interleave.
    const labOrder = this.labelOrder();
    for (let layer = 0; layer < N_LAYERS; layer++) {
      for (let st = 0; st < nStyles; st++) {
        const key = layer * nStyles + st;
        const bucketStart = starts[key];
        const bucketEnd = starts[key + 1];
        if (bucketStart === bucketEnd) continue;
        ctx.fillStyle = colors.fills[st];
        ctx.beginPath();
        for (let orderIndex = bucketStart; orderIndex < bucketEnd; orderIndex++) {
          const rectIndex = rects.order[orderIndex];
          ctx.rect(rects.x[rectIndex], rects.y[rectIndex], rects.w[rectIndex], rects.h[rectIndex]);
        }
        ctx.fill();
      }
      // Labels of this layer.
      if (li < labOrder.length && lab.layer[labOrder[li]] === layer) {
        ctx.font = font;
        ctx.textBaseline = "middle";
        while (li < labOrder.length && lab.layer[labOrder[li]] === layer) {
          const labelIndex = labOrder[li++];
          const name = lab.seg[labelIndex] ? nameOf(data, data.segName[lab.id[labelIndex]]) : nameOf(data, data.spanName[lab.id[labelIndex]]);
          let x = lab.x[labelIndex];
          let width = lab.w[labelIndex];
          if (x < geometry.plotX) {
            width -= geometry.plotX - x;
            x = geometry.plotX;
          }
          if (x + width > geometry.plotX + geometry.plotW) width = geometry.plotX + geometry.plotW - x;
          const txt = this.fit(font, name, width - 8);
          if (!txt) continue;
          ctx.fillStyle = colors.text[lab.key[labelIndex] % nStyles];
          ctx.fillText(txt, x + 4, lab.y[labelIndex] + lab.h[labelIndex] / 2 + 0.5);
        }
      }
    }
    // Open spans: dashed outline to the display end and a clip marker.
    if (this.opens.length) {
      ctx.save();
      ctx.setLineDash([4, 3]);
      ctx.lineWidth = 1.25;
      for (let offset = 0; offset < this.opens.length; offset += 5) {
        const [x, y, width, height, nm] = [this.opens[offset], this.opens[offset + 1], this.opens[offset + 2], this.opens[offset + 3], this.opens[offset + 4]];
        ctx.strokeStyle = colors.base(nm);
        ctx.strokeRect(x + 0.5, y + 0.5, Math.max(0, width - 1), height - 1);
      }
      ctx.setLineDash([]);
      ctx.strokeStyle = scene.theme.fg1;
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      for (let offset = 0; offset < this.opens.length; offset += 5) {
        const x = this.opens[offset] + this.opens[offset + 2];
        const y = this.opens[offset + 1];
        const height = this.opens[offset + 3];
        // Zig-zag "torn" end: the span was cut here, not finished.
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
    if (this.errs.length) {
      ctx.fillStyle = scene.theme.error;
      ctx.beginPath();
      for (let offset = 0; offset < this.errs.length; offset += 4) {
        const x = this.errs[offset];
        const y = this.errs[offset + 1];
        const width = this.errs[offset + 2];
        const height = this.errs[offset + 3];
        const thickness = Math.max(2, Math.min(3, height / 5));
        ctx.rect(x, y + height - thickness, width, thickness);
      }
      ctx.fill();
    }
  }

  /**
   * @param {number} x
   * @param {number} y
   * @param {number} width
   * @param {number} height
   * @param {number} id
   * @param {number} layer
   * @param {number} key
   * @param {number} seg
   */
  pushLabel(x, y, width, height, id, layer, key, seg) {
    const labels = this.lab;
    if (labels.n === labels.x.length) {
      for (const field of /** @type {const} */ (["x", "y", "w", "h", "id", "layer", "key", "seg"])) {
        /** @type {any} */ (labels)[field] = grown(labels[field]);
      }
    }
    const index = labels.n++;
    labels.x[index] = x;
    labels.y[index] = y;
    labels.w[index] = width;
    labels.h[index] = height;
    labels.id[index] = id;
    labels.layer[index] = layer;
    labels.key[index] = key;
    labels.seg[index] = seg;
  }

  /** Label indices ordered by layer (stable). */
  labelOrder() {
    const labels = this.lab;
    /** @type {number[]} */
    const out = [];
    for (let layer = 0; layer < N_LAYERS; layer++) for (let i = 0; i < labels.n; i++) if (labels.layer[i] === layer) out.push(i);
    return out;
  }

  /**
   * @param {Scene} scene
   * @param {number} r0
   * @param {number} r1
   * @param {import("./lod.js").TimeScale} sc
   */
  paintEvents(scene, r0, r1, sc) {
    const { ctx, scratch, clusters } = this;
    const { d: data, L: layout, g: geometry, evVis, colors, theme } = scene;
    if (data.nEvents === 0) return;
    /** @type {Map<string, number[]>} */
    const singles = new Map();
    /** @type {number[]} */
    const badges = [];
    /** @type {number[]} */
    const unmatched = [];
    for (let row = r0; row < r1; row++) {
      const sample = layout.rows[row];
      if (data.evOff[sample + 1] === data.evOff[sample]) continue;
      const ex = layout.expanded[row] === 1;
      const lanes = ex ? data.nLanes[sample] : 1;
      for (let laneIndex = 0; laneIndex < lanes; laneIndex++) {
        const lane = ex ? laneIndex : -1;
        if (ex && data.laneEvOff[data.laneBase[sample] + laneIndex] === data.laneEvOff[data.laneBase[sample] + laneIndex + 1]) continue;
        const box = barBox(layout, row, ex ? laneIndex : 0);
        const marker = markerGeom(box);
        const cy = canvasY(geometry, marker.cy);
        for (const kind of [EV_INSTANT, EV_UNMATCHED]) {
          rowEventClusters(data, sample, lane, sc, evVis, kind, scratch, clusters);
          for (let cluster = 0; cluster < clusters.n; cluster++) {
            const x = clusters.x[cluster];
            const ev = clusters.first[cluster];
            const count = clusters.count[cluster];
            if (kind === EV_UNMATCHED) {
              unmatched.push(x, canvasY(geometry, box.y), box.h, count);
              continue;
            }
            if (count > 1) {
              badges.push(x, cy, marker.r, count, ev);
              continue;
            }
            const fill = colors.fills[colors.style(data.evName[ev], evVis[ev] === 2 ? V_SPAN_DIM : V_SPAN)];
            let arr = singles.get(fill);
            if (!arr) {
              arr = [];
              singles.set(fill, arr);
            }
            arr.push(x, cy, marker.r);
          }
        }
      }
    }
    // Instant events: diamonds with a background-coloured rim, batched by colour.
    ctx.lineWidth = 1;
    ctx.strokeStyle = theme.bg;
    for (const [fill, diamonds] of singles) {
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
    // Clusters: a small grey pill with the count.
    if (badges.length) {
      this.badgeFill = mix(theme.fg1, theme.bg, 0.28);
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
        const width = showText ? Math.max(rr * 2, this.textWidth(font, label) + 5) : rr * 2;
        ctx.fillStyle = this.badgeFill;
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
    // Unmatched ends: a red end bracket "]" with a flag, distinct from events.
    if (unmatched.length) {
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
  }

  /**
   * Brush range, cursor, hover and selection outlines.
   * @param {Scene} scene
   */
  paintOverlays(scene) {
    const { ctx } = this;
    const { d: data, L: layout, g: geometry, theme } = scene;
    const top = geometry.axisH;
    const height = this.h;
    paintFinishLines(this, scene);
    if (scene.brush) {
      const left = xOf(geometry, Math.min(scene.brush[0], scene.brush[1]));
      const right = xOf(geometry, Math.max(scene.brush[0], scene.brush[1]));
      ctx.fillStyle = theme.brand;
      ctx.globalAlpha = 0.12;
      ctx.fillRect(left, top, Math.max(1, right - left), height - top);
      ctx.globalAlpha = 0.9;
      ctx.fillRect(Math.round(left), top, 1, height - top);
      ctx.fillRect(Math.round(right), top, 1, height - top);
      ctx.globalAlpha = 1;
    }
    const hov = hitBox(data, layout, geometry, scene.hover);
    if (hov) {
      ctx.strokeStyle = theme.fg1;
      ctx.lineWidth = 1;
      ctx.strokeRect(Math.round(hov.x) - 0.5, Math.round(hov.y) - 0.5, Math.max(1, Math.round(hov.w)) + 1, Math.round(hov.h) + 1);
    }
    const sel = hitBox(data, layout, geometry, scene.selection);
    if (sel) {
      ctx.strokeStyle = theme.fg0;
      ctx.lineWidth = 2;
      ctx.strokeRect(Math.round(sel.x) - 1, Math.round(sel.y) - 1, Math.max(1, Math.round(sel.w)) + 2, Math.round(sel.h) + 2);
      ctx.strokeStyle = theme.brand;
      ctx.lineWidth = 1;
      ctx.strokeRect(Math.round(sel.x) - 2.5, Math.round(sel.y) - 2.5, Math.max(1, Math.round(sel.w)) + 5, Math.round(sel.h) + 5);
    }
    if (Number.isFinite(scene.cursor)) {
      const x = Math.round(xOf(geometry, scene.cursor)) + 0.5;
      ctx.strokeStyle = theme.cursor;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x, top);
      ctx.lineTo(x, height);
      ctx.stroke();
    }
  }


}
