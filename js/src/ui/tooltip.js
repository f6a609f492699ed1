// What the payload alone says about a pointed-at item: `localSummary` (also the
// details panel's copy-as-JSON fallback) and the hover tooltip built from it.

import { F_OPEN, F_ERROR, F_VIRTUAL, EV_UNMATCHED, CLIP_REASONS, clipReasonOf, nameOf, sampleLabel, sampleRowId, sourceOf, statusOf } from "../data/decode.js";
import { el } from "../util/dom.js";
import { formatDuration, formatNumber } from "../util/format.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../render/hit.js").Hit} Hit */

/**
 * Plain-data summary of a selection from the payload alone (used for the
 * copy-as-JSON fallback and before the attributes arrive, and by the tooltip).
 * @param {Data} d
 * @param {Hit} h
 */
export function localSummary(d, h) {
  const sm = d.meta.samples;
  if (!("sample" in h)) return {};
  const s = h.sample;
  /** @type {Record<string, any>} */
  const out = {
    sample: {
      row: sampleRowId(d, s),
      id: sm.sample_index[s] ?? null,
      group: sm.group_index[s] ?? null,
      source: sourceOf(d, s),
      status: statusOf(d, s),
      reward: Number.isFinite(d.smpReward[s]) ? d.smpReward[s] : null,
      label: sm.label[s] ?? null,
      attempts: d.smpAttempts[s],
      duration: d.smpEnd[s] - d.smpStart[s],
      trace_id: sm.trace_id[s] ?? null,
    },
  };
  if (h.type === "span" || h.type === "segment") {
    const i = h.span;
    out.name = nameOf(d, d.spanName[i]);
    out.start = d.spanStart[i];
    out.end = d.spanEnd[i];
    out.open = !!(d.spanFlags[i] & F_OPEN);
    out.attempt = d.spanAttempt[i];
    if (h.type === "segment") out.segment = { name: nameOf(d, d.segName[h.seg]), start: d.segStart[h.seg], end: d.segEnd[h.seg] };
  } else if (h.type === "event") {
    out.name = nameOf(d, d.evName[h.ev]);
    out.ts = d.evTs[h.ev];
    out.kind = d.evKind[h.ev] === EV_UNMATCHED ? "unmatched end" : "instant";
    out.count = h.count;
  }
  return out;
}

/**
 * Fill the tooltip for a label, span, segment or event hit.
 * @param {HTMLElement} tt
 * @param {Data} d
 * @param {Hit} h
 */
export function fillTooltip(tt, d, h) {
  tt.replaceChildren();
  /** @param {string} k @param {string} v */
  const line = (k, v) => {
    const row = el("div", "stw-tt-row");
    row.appendChild(el("span", "stw-tt-k", k));
    row.appendChild(el("span", "stw-tt-v", v));
    tt.appendChild(row);
  };
  const sum = localSummary(d, h);
  const s = "sample" in h ? h.sample : -1;
  const sampleLine = () => {
    line("sample", sum.sample.id === null ? `row ${sum.sample.row}` : String(sum.sample.id));
    line("source", sum.sample.source || "—");
  };
  if (h.type === "label") {
    tt.appendChild(el("div", "stw-tt-title", sampleLabel(d, s)));
    line("status", sum.sample.status || "—");
    line("reward", sum.sample.reward !== null ? formatNumber(sum.sample.reward) : "—");
    line("duration", formatDuration(sum.sample.duration));
    line("lanes", String(d.nLanes[s]));
    if (d.smpOpen[s]) line("open spans", String(d.smpOpen[s]));
    const lab = sum.sample.label;
    if (lab) line("label", lab.length > 120 ? lab.slice(0, 120) + "…" : lab);
    if (d.nLanes[s] > 1) tt.appendChild(el("div", "stw-tt-hint", "click to expand / collapse"));
    return;
  }
  if (h.type === "span") {
    const fl = d.spanFlags[h.span];
    tt.appendChild(el("div", "stw-tt-title", sum.name));
    sampleLine();
    line("attempt", String(sum.attempt));
    const p = d.spanParent[h.span];
    line("parent", p >= 0 ? nameOf(d, d.spanName[p]) : "—");
    line("start", formatDuration(sum.start));
    line(sum.open ? "display end" : "end", formatDuration(sum.end));
    line("duration", formatDuration(sum.end - sum.start));
    if (sum.open) line("state", `open (clipped at ${CLIP_REASONS[clipReasonOf(fl)] || "display end"})`);
    if (fl & F_ERROR) line("error", "yes");
    if (fl & F_VIRTUAL) line("PD", "virtual lane");
    return;
  }
  if (h.type === "segment") {
    const seg = sum.segment;
    tt.appendChild(el("div", "stw-tt-title", `${sum.name} ${seg.name}`));
    sampleLine();
    line("attempt", String(sum.attempt));
    const p = d.spanParent[h.span];
    line("parent", p >= 0 ? nameOf(d, d.spanName[p]) : "—");
    line("start", formatDuration(seg.start));
    line("end", formatDuration(seg.end));
    const dur = seg.end - seg.start;
    const vd = sum.end - sum.start;
    line("duration", `${formatDuration(dur)}${vd > 0 ? ` (${((dur / vd) * 100).toFixed(1)}% of ${sum.name})` : ""}`);
    return;
  }
  if (h.type === "event") {
    const e = h.ev;
    const unmatched = sum.kind === "unmatched end";
    if (h.count > 1) {
      const counts = new Map();
      for (const m of h.members) counts.set(nameOf(d, d.evName[m]), (counts.get(nameOf(d, d.evName[m])) || 0) + 1);
      tt.appendChild(el("div", "stw-tt-title", `${h.count} ${unmatched ? "unmatched ends" : "events"}`));
      for (const [n, c] of [...counts].slice(0, 8)) line(n, `×${c}`);
      const ts = h.members.map((m) => d.evTs[m]);
      sampleLine();
      line("from", formatDuration(Math.min(...ts)));
      line("to", formatDuration(Math.max(...ts)));
      tt.appendChild(el("div", "stw-tt-hint", "zoom in to separate them"));
      return;
    }
    tt.appendChild(el("div", "stw-tt-title", unmatched ? `unmatched end: ${sum.name}` : sum.name));
    sampleLine();
    line("attempt", String(d.evAttempt[e]));
    const p = d.evParent[e];
    line("parent", p >= 0 ? nameOf(d, d.spanName[p]) : "—");
    line("time", formatDuration(sum.ts));
    if (unmatched) tt.appendChild(el("div", "stw-tt-hint", "an end record whose start is missing"));
  }
}

/**
 * Show the tooltip near the pointer, flipped to stay inside `main`.
 * @param {HTMLElement} tt
 * @param {HTMLElement} main
 * @param {number} clientX
 * @param {number} clientY
 */
export function placeTooltip(tt, main, clientX, clientY) {
  const mr = main.getBoundingClientRect();
  tt.hidden = false;
  const tw = tt.offsetWidth;
  const th = tt.offsetHeight;
  let x = clientX - mr.left + 14;
  let y = clientY - mr.top + 16;
  if (x + tw > mr.width - 4) x = Math.max(4, clientX - mr.left - tw - 14);
  if (y + th > mr.height - 4) y = Math.max(4, clientY - mr.top - th - 12);
  tt.style.transform = `translate(${Math.round(x)}px, ${Math.round(y)}px)`;
}

/**
 * Whether two hits name the same item (hover changes repaint only then).
 * @param {Hit|null} a
 * @param {Hit|null} b
 */
export function sameHit(a, b) {
  if (a === b) return true;
  if (!a || !b || a.type !== b.type) return false;
  if (a.type === "span" && b.type === "span") return a.span === b.span;
  if (a.type === "segment" && b.type === "segment") return a.seg === b.seg;
  if (a.type === "event" && b.type === "event") return a.ev === b.ev && a.count === b.count;
  return false;
}

/**
 * Point the hover at `h`: the item outlined, the row marked, the tooltip's
 * text and place, the pointer's shape. Returns whether the outline or the
 * marked row changed, i.e. whether a repaint is due.
 * @param {{data: Data, hover: Hit|null, hoverRow: number, tooltip: HTMLElement, canvas: HTMLElement, mainEl: HTMLElement}} st
 * @param {Hit|null} h
 * @param {number} clientX
 * @param {number} clientY
 */
export function pointAt(st, h, clientX, clientY) {
  const item = h && (h.type === "span" || h.type === "segment" || h.type === "event") ? h : null;
  const row = h && "row" in h ? h.row : -1;
  const same = sameHit(item, st.hover) && row === st.hoverRow;
  st.hover = item;
  st.hoverRow = row;
  if (!h || (h.type !== "label" && !item)) {
    st.tooltip.hidden = true;
    st.canvas.style.cursor = "";
    return !same;
  }
  st.canvas.style.cursor = h.type === "label" ? "pointer" : "";
  if (!same) fillTooltip(st.tooltip, st.data, h);
  placeTooltip(st.tooltip, st.mainEl, clientX, clientY);
  return !same;
}
