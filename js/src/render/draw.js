// Canvas painting of the timeline: row backgrounds, spans (batched by colour,
// merged below a pixel), PD phases, open and unmatched markers, event markers
// and cluster badges, cursor, brush range, selection; margins.js adds the label
// gutter and the time axis. Only visible rows and the visible time window are
// touched. Box geometry (what is drawn where) lives in hit.js.

import { sizeCanvas, roundRect } from "./canvas.js";
import { paintGutter, paintAxis } from "./margins.js";
import { F_OPEN, F_ERROR, F_VIRTUAL, LK_SPANS, LK_VIRTUAL, EV_INSTANT, EV_UNMATCHED, nameOf } from "../data/decode.js";
import { ROW_PAD, laneGap, barBox, visibleRows } from "../data/layout.js";
import { RunBuffer, ClusterBuffer, EventScratch, mergeLane } from "./lod.js";
import { scaleOf, xOf, canvasY, pdBand, markerGeom, rowEventClusters, hitBox } from "./hit.js";
import { V_SPAN, V_SPAN_DIM, V_SEG, V_SEG_DIM, V_OPEN, V_OPEN_DIM, mix } from "./colors.js";
import { niceStep } from "../util/format.js";

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
   * @param {number} w
   * @param {number} h
   * @param {number} key
   */
  push(x, y, w, h, key) {
    if (this.n === this.x.length) this.grow();
    const k = this.n++;
    this.x[k] = x;
    this.y[k] = y;
    this.w[k] = w;
    this.h[k] = h;
    this.key[k] = key;
  }
  grow() {
    const cap = this.x.length * 2;
    const g = (/** @type {any} */ a) => {
      const b = new a.constructor(cap);
      b.set(a);
      return b;
    };
    this.x = g(this.x);
    this.y = g(this.y);
    this.w = g(this.w);
    this.h = g(this.h);
    this.key = g(this.key);
    this.order = new Uint32Array(cap);
  }
  /**
   * Counting sort by key; returns bucket starts (length nKeys + 1).
   * @param {number} nKeys
   */
  sort(nKeys) {
    if (this.counts.length < nKeys + 1) this.counts = new Uint32Array(nKeys + 1);
    const c = this.counts;
    c.fill(0, 0, nKeys + 1);
    for (let i = 0; i < this.n; i++) c[this.key[i] + 1]++;
    for (let k = 0; k < nKeys; k++) c[k + 1] += c[k];
    const pos = c.slice(0, nKeys + 1);
    for (let i = 0; i < this.n; i++) this.order[pos[this.key[i]]++] = i;
    return c;
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
  }

  /**
   * Size the backing store to CSS size × devicePixelRatio.
   * @param {number} w
   * @param {number} h
   * @param {number} dpr
   */
  resize(w, h, dpr) {
    sizeCanvas(this.canvas, w, h, dpr);
    this.w = w;
    this.h = h;
    this.dpr = dpr;
  }

  /**
   * Text width with a per-font cache keyed by string.
   * @param {string} font
   * @param {string} text
   */
  textWidth(font, text) {
    let m = this.widthCache.get(font);
    if (!m) {
      m = new Map();
      this.widthCache.set(font, m);
    }
    let w = m.get(/** @type {any} */ (text));
    if (w === undefined) {
      this.ctx.font = font;
      w = this.ctx.measureText(text).width;
      if (m.size > 5000) m.clear();
      m.set(/** @type {any} */ (text), w);
    }
    return w;
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
   * @param {Scene} S
   * @returns {number} rows painted
   */
  paint(S) {
    const { ctx } = this;
    const { d, L, g, theme } = S;
    const W = this.w;
    const H = this.h;
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.fillStyle = theme.bg;
    ctx.fillRect(0, 0, W, H);

    const rowsTop = g.axisH;
    const rowsH = H - g.axisH;
    const [r0, r1] = visibleRows(L, g.scrollTop, rowsH);
    this.drawnRows = r1 - r0;
    const sc = scaleOf(g);
    const step = niceStep(sc.pxPerSec, 96);
    const firstTick = Math.ceil(g.t0 / step) * step;

    // Row backgrounds.
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, rowsTop, W, rowsH);
    ctx.clip();
    for (let r = r0; r < r1; r++) {
      const y = canvasY(g, L.rowTop[r]);
      const h = L.rowTop[r + 1] - L.rowTop[r];
      const bg = r === S.selRow ? theme.selRow : r === S.hoverRow ? theme.hoverRow : r % 2 === 1 ? theme.stripe : null;
      if (bg) {
        ctx.fillStyle = bg;
        ctx.fillRect(0, y, W, h);
      }
    }
    // Grid.
    ctx.strokeStyle = theme.border2;
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let t = firstTick; t <= g.t1; t += step) {
      const x = Math.round(xOf(g, t)) + 0.5;
      ctx.moveTo(x, rowsTop);
      ctx.lineTo(x, H);
    }
    ctx.stroke();
    ctx.restore();

    // Bars, PD phases, events: clipped to the plot.
    ctx.save();
    ctx.beginPath();
    ctx.rect(g.plotX, rowsTop, g.plotW, rowsH);
    ctx.clip();
    this.paintBars(S, r0, r1, sc);
    this.paintEvents(S, r0, r1, sc);
    this.paintOverlays(S);
    ctx.restore();

    paintGutter(this, S, r0, r1);
    paintAxis(this, S, step, firstTick);
    return this.drawnRows;
  }

  /**
   * @param {Scene} S
   * @param {number} r0
   * @param {number} r1
   * @param {import("./lod.js").TimeScale} sc
   */
  paintBars(S, r0, r1, sc) {
    const { ctx, runs, rects, lab } = this;
    const { d, L, g, vis, colors } = S;
    rects.n = 0;
    lab.n = 0;
    this.opens.length = 0;
    this.errs.length = 0;
    const laneH = L.laneH;
    const gap = laneGap(laneH);
    const barH = laneH - gap;
    const nStyles = colors.nStyles;
    const maxName = colors.nNames - 1;
    const labelOk = barH >= 11;
    const minLabelW = 28;
    for (let r = r0; r < r1; r++) {
      const s = L.rows[r];
      const ex = L.expanded[r] === 1;
      const top = canvasY(g, L.rowTop[r]) + ROW_PAD;
      const base = d.laneBase[s];
      const nl = d.nLanes[s];
      for (let l = 0; l < nl; l++) {
        const k = base + l;
        const kind = d.laneKind[k];
        if (!(kind & (LK_SPANS | LK_VIRTUAL))) continue;
        const y = ex ? top + l * laneH : top;
        const lo = d.laneSpanOff[k];
        const hi = d.laneSpanOff[k + 1];
        runs.reset();
        mergeLane(d.spanStart, d.spanEnd, d.spanEndMax, vis, lo, hi, sc, runs);
        for (let j = 0; j < runs.n; j++) {
          const i = runs.span[j];
          const fl = d.spanFlags[i];
          const x0 = runs.x0[j];
          const w = runs.x1[j] - x0;
          const single = runs.count[j] === 1;
          const dim = vis[i] === 2;
          const nm = Math.min(d.spanName[i], maxName);
          if (fl & F_VIRTUAL) {
            // PD phase: its own lane when expanded, a thin band when collapsed.
            const pb = ex ? { y, h: barH } : pdBand({ y, h: barH }, d.spanPd[i]);
            const layer = ex ? 0 : PD_LAYER;
            const sLo = d.spanSegOff[i];
            const sHi = d.spanSegOff[i + 1];
            if (single && w >= 3 && sHi > sLo) {
              for (let q = sLo; q < sHi; q++) {
                const sg = d.segOrder[q];
                let a = xOf(g, d.segStart[sg]);
                let b = xOf(g, d.segEnd[sg]);
                if (b < g.plotX - 2 || a > g.plotX + g.plotW + 2) continue;
                if (a < g.plotX - 2) a = g.plotX - 2;
                if (b > g.plotX + g.plotW + 2) b = g.plotX + g.plotW + 2;
                const key = layer * nStyles + colors.style(d.segName[sg], dim ? V_SEG_DIM : V_SEG);
                rects.push(a, pb.y, Math.max(0.6, b - a), pb.h, key);
                if (ex && labelOk && b - a >= minLabelW) this.pushLabel(a, pb.y, b - a, pb.h, sg, layer, key, 1);
              }
            } else {
              let sn = -1;
              let best = -1;
              for (let q = sLo; q < sHi; q++) {
                const sg = d.segOrder[q];
                const du = d.segEnd[sg] - d.segStart[sg];
                if (du > best) {
                  best = du;
                  sn = d.segName[sg];
                }
              }
              const key = layer * nStyles + (sn >= 0 ? colors.style(sn, dim ? V_SEG_DIM : V_SEG) : colors.style(nm, dim ? V_SPAN_DIM : V_SPAN));
              rects.push(x0, pb.y, w, pb.h, key);
            }
            continue;
          }
          const layer = ex ? 0 : S.raiseShown && !dim ? 7 : Math.min(d.spanDepth[i], 6);
          const open = single && fl & F_OPEN;
          const variant = open ? (dim ? V_OPEN_DIM : V_OPEN) : dim ? V_SPAN_DIM : V_SPAN;
          const key = layer * nStyles + colors.style(nm, variant);
          rects.push(x0, y, w, barH, key);
          if (single) {
            if (open) this.opens.push(x0, y, w, barH, nm);
            if (fl & F_ERROR) this.errs.push(x0, y, w, barH);
            // Collapsed rows overlay children on parents: label leaves only.
            if (labelOk && w >= minLabelW && (ex || !(d.spanHasChild[i] & 1))) {
              // Keep the text clear of the PD band a collapsed generation bar carries.
              const lh = !ex && d.spanHasChild[i] & 2 ? barH - pdBand({ y: 0, h: barH }, 1).h * 2 : barH;
              this.pushLabel(x0, y, w, lh, i, layer, key, 0);
            }
          }
        }
      }
    }
    // Draw grouped by layer, then style; labels after their layer's fills.
    const nKeys = N_LAYERS * nStyles;
    const starts = rects.sort(nKeys);
    const font = `${barH >= 15 ? 11 : 10}px ${S.theme.font}`;
    let li = 0;
    // Labels are pushed in row order; sort them by layer for the interleave.
    const labOrder = this.labelOrder();
    for (let layer = 0; layer < N_LAYERS; layer++) {
      for (let st = 0; st < nStyles; st++) {
        const key = layer * nStyles + st;
        const a = starts[key];
        const b = starts[key + 1];
        if (a === b) continue;
        ctx.fillStyle = colors.fills[st];
        ctx.beginPath();
        for (let q = a; q < b; q++) {
          const o = rects.order[q];
          ctx.rect(rects.x[o], rects.y[o], rects.w[o], rects.h[o]);
        }
        ctx.fill();
      }
      // Labels of this layer.
      if (li < labOrder.length && lab.layer[labOrder[li]] === layer) {
        ctx.font = font;
        ctx.textBaseline = "middle";
        while (li < labOrder.length && lab.layer[labOrder[li]] === layer) {
          const o = labOrder[li++];
          const name = lab.seg[o] ? nameOf(d, d.segName[lab.id[o]]) : nameOf(d, d.spanName[lab.id[o]]);
          let x = lab.x[o];
          let w = lab.w[o];
          if (x < g.plotX) {
            w -= g.plotX - x;
            x = g.plotX;
          }
          if (x + w > g.plotX + g.plotW) w = g.plotX + g.plotW - x;
          const txt = this.fit(font, name, w - 8);
          if (!txt) continue;
          ctx.fillStyle = colors.text[lab.key[o] % nStyles];
          ctx.fillText(txt, x + 4, lab.y[o] + lab.h[o] / 2 + 0.5);
        }
      }
    }
    // Open spans: dashed outline to the display end and a clip marker.
    if (this.opens.length) {
      ctx.save();
      ctx.setLineDash([4, 3]);
      ctx.lineWidth = 1.25;
      for (let q = 0; q < this.opens.length; q += 5) {
        const [x, y, w, h, nm] = [this.opens[q], this.opens[q + 1], this.opens[q + 2], this.opens[q + 3], this.opens[q + 4]];
        ctx.strokeStyle = colors.base(nm);
        ctx.strokeRect(x + 0.5, y + 0.5, Math.max(0, w - 1), h - 1);
      }
      ctx.setLineDash([]);
      ctx.strokeStyle = S.theme.fg1;
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      for (let q = 0; q < this.opens.length; q += 5) {
        const x = this.opens[q] + this.opens[q + 2];
        const y = this.opens[q + 1];
        const h = this.opens[q + 3];
        // Zig-zag "torn" end: the span was cut here, not finished.
        const z = Math.min(3, h / 4);
        ctx.moveTo(x, y);
        ctx.lineTo(x - z, y + h / 4);
        ctx.lineTo(x, y + h / 2);
        ctx.lineTo(x - z, y + (3 * h) / 4);
        ctx.lineTo(x, y + h);
      }
      ctx.stroke();
      ctx.restore();
    }
    if (this.errs.length) {
      ctx.fillStyle = S.theme.error;
      ctx.beginPath();
      for (let q = 0; q < this.errs.length; q += 4) {
        const x = this.errs[q];
        const y = this.errs[q + 1];
        const w = this.errs[q + 2];
        const h = this.errs[q + 3];
        const t = Math.max(2, Math.min(3, h / 5));
        ctx.rect(x, y + h - t, w, t);
      }
      ctx.fill();
    }
  }

  /**
   * @param {number} x
   * @param {number} y
   * @param {number} w
   * @param {number} h
   * @param {number} id
   * @param {number} layer
   * @param {number} key
   * @param {number} seg
   */
  pushLabel(x, y, w, h, id, layer, key, seg) {
    const L = this.lab;
    if (L.n === L.x.length) {
      const cap = L.n * 2;
      for (const k of /** @type {const} */ (["x", "y", "w", "h", "id", "layer", "key", "seg"])) {
        const a = /** @type {any} */ (L[k]);
        const b = new a.constructor(cap);
        b.set(a);
        /** @type {any} */ (L)[k] = b;
      }
    }
    const k = L.n++;
    L.x[k] = x;
    L.y[k] = y;
    L.w[k] = w;
    L.h[k] = h;
    L.id[k] = id;
    L.layer[k] = layer;
    L.key[k] = key;
    L.seg[k] = seg;
  }

  /** Label indices ordered by layer (stable). */
  labelOrder() {
    const L = this.lab;
    /** @type {number[]} */
    const out = [];
    for (let layer = 0; layer < N_LAYERS; layer++) for (let i = 0; i < L.n; i++) if (L.layer[i] === layer) out.push(i);
    return out;
  }

  /**
   * @param {Scene} S
   * @param {number} r0
   * @param {number} r1
   * @param {import("./lod.js").TimeScale} sc
   */
  paintEvents(S, r0, r1, sc) {
    const { ctx, scratch, clusters } = this;
    const { d, L, g, evVis, colors, theme } = S;
    if (d.nEvents === 0) return;
    /** @type {Map<string, number[]>} */
    const singles = new Map();
    /** @type {number[]} */
    const badges = [];
    /** @type {number[]} */
    const unmatched = [];
    for (let r = r0; r < r1; r++) {
      const s = L.rows[r];
      if (d.evOff[s + 1] === d.evOff[s]) continue;
      const ex = L.expanded[r] === 1;
      const lanes = ex ? d.nLanes[s] : 1;
      for (let l = 0; l < lanes; l++) {
        const lane = ex ? l : -1;
        if (ex && d.laneEvOff[d.laneBase[s] + l] === d.laneEvOff[d.laneBase[s] + l + 1]) continue;
        const box = barBox(L, r, ex ? l : 0);
        const m = markerGeom(box);
        const cy = canvasY(g, m.cy);
        for (const kind of [EV_INSTANT, EV_UNMATCHED]) {
          rowEventClusters(d, s, lane, sc, evVis, kind, scratch, clusters);
          for (let c = 0; c < clusters.n; c++) {
            const x = clusters.x[c];
            const ev = clusters.first[c];
            const n = clusters.count[c];
            if (kind === EV_UNMATCHED) {
              unmatched.push(x, canvasY(g, box.y), box.h, n);
              continue;
            }
            if (n > 1) {
              badges.push(x, cy, m.r, n, ev);
              continue;
            }
            const fill = colors.fills[colors.style(d.evName[ev], evVis[ev] === 2 ? V_SPAN_DIM : V_SPAN)];
            let arr = singles.get(fill);
            if (!arr) {
              arr = [];
              singles.set(fill, arr);
            }
            arr.push(x, cy, m.r);
          }
        }
      }
    }
    // Instant events: diamonds with a background-coloured rim, batched by colour.
    ctx.lineWidth = 1;
    ctx.strokeStyle = theme.bg;
    for (const [fill, a] of singles) {
      ctx.fillStyle = fill;
      ctx.beginPath();
      for (let q = 0; q < a.length; q += 3) {
        const x = a[q];
        const y = a[q + 1];
        const rr = a[q + 2];
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
      for (let q = 0; q < badges.length; q += 5) {
        const x = badges[q];
        const y = badges[q + 1];
        const rr = badges[q + 2] + 1;
        const n = badges[q + 3];
        const label = n > 99 ? "99+" : String(n);
        const showText = rr >= 4;
        const w = showText ? Math.max(rr * 2, this.textWidth(font, label) + 5) : rr * 2;
        ctx.fillStyle = this.badgeFill;
        ctx.strokeStyle = theme.bg;
        ctx.beginPath();
        roundRect(ctx, x - w / 2, y - rr, w, rr * 2, rr);
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
      for (let q = 0; q < unmatched.length; q += 4) {
        const x = Math.round(unmatched[q]);
        const y = unmatched[q + 1];
        const h = unmatched[q + 2];
        ctx.moveTo(x - 4, y + 1);
        ctx.lineTo(x, y + 1);
        ctx.lineTo(x, y + h - 1);
        ctx.lineTo(x - 4, y + h - 1);
      }
      ctx.stroke();
      ctx.beginPath();
      for (let q = 0; q < unmatched.length; q += 4) {
        const x = Math.round(unmatched[q]);
        const y = unmatched[q + 1];
        ctx.moveTo(x, y - 1);
        ctx.lineTo(x + 5, y + 2);
        ctx.lineTo(x, y + 5);
        ctx.closePath();
      }
      ctx.fill();
      ctx.font = `bold 9px ${theme.font}`;
      ctx.textBaseline = "middle";
      for (let q = 0; q < unmatched.length; q += 4) {
        if (unmatched[q + 3] > 1) ctx.fillText(`×${unmatched[q + 3]}`, unmatched[q] + 6, unmatched[q + 1] + unmatched[q + 2] / 2 + 2);
      }
    }
  }

  /**
   * Brush range, cursor, hover and selection outlines.
   * @param {Scene} S
   */
  paintOverlays(S) {
    const { ctx } = this;
    const { d, L, g, theme } = S;
    const top = g.axisH;
    const H = this.h;
    if (S.brush) {
      const a = xOf(g, Math.min(S.brush[0], S.brush[1]));
      const b = xOf(g, Math.max(S.brush[0], S.brush[1]));
      ctx.fillStyle = theme.brand;
      ctx.globalAlpha = 0.12;
      ctx.fillRect(a, top, Math.max(1, b - a), H - top);
      ctx.globalAlpha = 0.9;
      ctx.fillRect(Math.round(a), top, 1, H - top);
      ctx.fillRect(Math.round(b), top, 1, H - top);
      ctx.globalAlpha = 1;
    }
    const hov = hitBox(d, L, g, S.hover);
    if (hov) {
      ctx.strokeStyle = theme.fg1;
      ctx.lineWidth = 1;
      ctx.strokeRect(Math.round(hov.x) - 0.5, Math.round(hov.y) - 0.5, Math.max(1, Math.round(hov.w)) + 1, Math.round(hov.h) + 1);
    }
    const sel = hitBox(d, L, g, S.selection);
    if (sel) {
      ctx.strokeStyle = theme.fg0;
      ctx.lineWidth = 2;
      ctx.strokeRect(Math.round(sel.x) - 1, Math.round(sel.y) - 1, Math.max(1, Math.round(sel.w)) + 2, Math.round(sel.h) + 2);
      ctx.strokeStyle = theme.brand;
      ctx.lineWidth = 1;
      ctx.strokeRect(Math.round(sel.x) - 2.5, Math.round(sel.y) - 2.5, Math.max(1, Math.round(sel.w)) + 5, Math.round(sel.h) + 5);
    }
    if (Number.isFinite(S.cursor)) {
      const x = Math.round(xOf(g, S.cursor)) + 0.5;
      ctx.strokeStyle = theme.cursor;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(x, top);
      ctx.lineTo(x, H);
      ctx.stroke();
    }
  }


}
