// The timeline's margins, painted after the rows: the row-label gutter (labels,
// expand carets, lane names, status dots) and the time axis with its ticks and
// the cursor and brush pills.

import { roundRect } from "./canvas.js";
import { F_PD_DETAIL, nameOf, sampleLabel, statusOf } from "../data/decode.js";
import { ROW_PAD } from "../data/layout.js";
import { xOf, canvasY } from "./hit.js";
import { formatTick, formatDuration } from "../util/format.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("./draw.js").Painter} Painter */
/** @typedef {import("./draw.js").Scene} Scene */

/**
 * Row labels, expand carets, lane names, status dots.
 * @param {Painter} p
 * @param {Scene} S
 * @param {number} r0
 * @param {number} r1
 */
export function paintGutter(p, S, r0, r1) {
  const { ctx } = p;
  const { d, L, g, theme } = S;
  const top = g.axisH;
  ctx.fillStyle = theme.bg1;
  ctx.fillRect(0, top, g.gutter, p.h - top);
  ctx.save();
  ctx.beginPath();
  ctx.rect(0, top, g.gutter, p.h - top);
  ctx.clip();
  const laneH = L.laneH;
  const fontSize = laneH >= 16 ? 12 : laneH >= 11 ? 11 : 9;
  const font = `${fontSize}px ${theme.font}`;
  const small = `${Math.min(fontSize, 10)}px ${theme.font}`;
  ctx.textBaseline = "middle";
  for (let r = r0; r < r1; r++) {
    const s = L.rows[r];
    const y0 = canvasY(g, L.rowTop[r]);
    const h = L.rowTop[r + 1] - L.rowTop[r];
    if (r === S.selRow || r === S.hoverRow) {
      ctx.fillStyle = r === S.selRow ? theme.selRow : theme.hoverRow;
      ctx.fillRect(0, y0, g.gutter, h);
    } else if (r % 2 === 1) {
      ctx.fillStyle = theme.stripe;
      ctx.fillRect(0, y0, g.gutter, h);
    }
    const cy = y0 + ROW_PAD + laneH / 2;
    if (laneH < 7) continue;
    const canExpand = d.nLanes[s] > 1;
    if (canExpand) {
      ctx.fillStyle = theme.fg2;
      ctx.beginPath();
      if (L.expanded[r]) {
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
    const status = statusOf(d, s);
    const bad = status && status !== "completed";
    const untraced = Number.isNaN(d.smpStart[s]);
    ctx.font = font;
    ctx.fillStyle = untraced ? theme.fg2 : theme.fg1;
    const label = sampleLabel(d, s) + (untraced ? " (untraced)" : "");
    const maxW = g.gutter - 20 - (bad ? 14 : 6);
    ctx.fillText(p.fit(font, label, maxW), 18, cy + 0.5);
    if (bad) {
      ctx.fillStyle = status === "truncated" ? "#e0912f" : status === "pending" ? theme.fg2 : theme.error;
      ctx.beginPath();
      ctx.arc(g.gutter - 9, cy, 3.5, 0, Math.PI * 2);
      ctx.fill();
    }
    if (L.expanded[r] && laneH >= 11) {
      ctx.font = small;
      ctx.fillStyle = theme.fg2;
      ctx.textAlign = "right";
      const base = d.laneBase[s];
      for (let l = 1; l < d.nLanes[s]; l++) {
        const k = base + l;
        const name = laneName(d, k);
        if (!name) continue;
        ctx.fillText(p.fit(small, name, g.gutter - 34), g.gutter - 8, y0 + ROW_PAD + l * laneH + laneH / 2 + 0.5);
      }
      ctx.textAlign = "left";
    }
  }
  ctx.restore();
  ctx.fillStyle = theme.border1;
  ctx.fillRect(g.gutter - 1, top, 1, p.h - top);
}

/**
 * Time axis with readable relative ticks, cursor and brush labels.
 * @param {Painter} p
 * @param {Scene} S
 * @param {number} step
 * @param {number} firstTick
 */
export function paintAxis(p, S, step, firstTick) {
  const { ctx } = p;
  const { g, theme } = S;
  const W = p.w;
  ctx.fillStyle = theme.bg1;
  ctx.fillRect(0, 0, W, g.axisH);
  ctx.fillStyle = theme.border1;
  ctx.fillRect(0, g.axisH - 1, W, 1);
  const font = `11px ${theme.font}`;
  ctx.font = font;
  ctx.textBaseline = "middle";
  const offsetMode = step < 1e-3;
  const base = offsetMode ? Math.floor(g.t0 / (step * 10)) * step * 10 : 0;
  ctx.fillStyle = theme.fg2;
  ctx.fillText(offsetMode ? `@ ${formatTick(base, 1e-3)}` : "sample", 8, g.axisH / 2);
  ctx.save();
  ctx.beginPath();
  ctx.rect(g.plotX - 1, 0, g.plotW + 12, g.axisH);
  ctx.clip();
  ctx.strokeStyle = theme.border1;
  ctx.beginPath();
  for (let t = firstTick; t <= g.t1; t += step) {
    const x = Math.round(xOf(g, t)) + 0.5;
    ctx.moveTo(x, g.axisH - 6);
    ctx.lineTo(x, g.axisH);
  }
  ctx.stroke();
  ctx.fillStyle = theme.fg1;
  let n = 0;
  for (let t = firstTick; t <= g.t1 && n < 200; t += step, n++) {
    const tt = Math.abs(t) < step * 1e-6 ? 0 : t;
    const x = xOf(g, tt);
    ctx.fillText(formatTick(tt, step, base), x + 4, g.axisH / 2 - 1);
  }
  const pill = (/** @type {number} */ x, /** @type {string} */ text, /** @type {string} */ bg) => {
    const w = p.textWidth(font, text) + 10;
    const px = Math.min(Math.max(x - w / 2, g.plotX), g.plotX + g.plotW - w);
    ctx.fillStyle = bg;
    ctx.beginPath();
    roundRect(ctx, px, 3, w, g.axisH - 8, 4);
    ctx.fill();
    ctx.fillStyle = "#ffffff";
    ctx.fillText(text, px + 5, g.axisH / 2 - 1);
  };
  if (S.brush) {
    const a = Math.min(S.brush[0], S.brush[1]);
    const b = Math.max(S.brush[0], S.brush[1]);
    pill((xOf(g, a) + xOf(g, b)) / 2, `${formatDuration(b - a)}`, theme.brand);
  }
  if (Number.isFinite(S.cursor) && S.cursor >= g.t0 && S.cursor <= g.t1) pill(xOf(g, S.cursor), formatDuration(S.cursor), theme.cursor);
  ctx.restore();
}

/**
 * Name shown for an expanded lane: "[P]"/"[D]" for PD lanes, else the name
 * of its first drawable span.
 * @param {Data} d
 * @param {number} k lane slot
 */
export function laneName(d, k) {
  for (let i = d.laneSpanOff[k]; i < d.laneSpanOff[k + 1]; i++) {
    if (d.spanFlags[i] & F_PD_DETAIL) continue;
    return nameOf(d, d.spanName[i]);
  }
  return "";
}

/**
 * The message over an empty plot (no samples, or none matching the filter).
 * @param {Painter} p
 * @param {import("../ui/theme.js").Theme} theme
 * @param {Data} d
 * @param {import("./hit.js").Geo} g
 */
export function paintEmpty(p, theme, d, g) {
  const ctx = p.ctx;
  ctx.fillStyle = theme.fg2;
  ctx.font = `13px ${theme.font}`;
  ctx.textBaseline = "middle";
  const msg = d.nSamples === 0 ? "no samples in this payload" : "no samples match the filter";
  ctx.fillText(msg, g.plotX + 12, g.axisH + 30);
}
