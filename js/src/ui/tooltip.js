// What the payload alone says about a pointed-at item: `localSummary` (also the
// details panel's copy-as-JSON fallback) and the hover tooltip built from it.

import { F_OPEN, F_ERROR, F_VIRTUAL, EV_UNMATCHED, CLIP_REASONS, clipReasonOf, nameOf, sampleLabel, sampleRowId, sourceOf, statusOf } from "../data/decode.js";
import { el } from "../util/dom.js";
import { FATES, FATE_LABELS } from "../data/fates.js";
import { formatDuration, formatNumber } from "../util/format.js";
import { isItem } from "../render/hit.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../render/hit.js").Hit} Hit */

/**
 * Plain-data summary of a selection from the payload alone (used for the
 * copy-as-JSON fallback and before the attributes arrive, and by the tooltip).
 * @param {Data} data
 * @param {Hit} hit
 */
export function localSummary(data, hit) {
  const sm = data.meta.samples;
  if (!("sample" in hit)) return {};
  const sample = hit.sample;
  /** @type {Record<string, any>} */
  const out = {
    sample: {
      row: sampleRowId(data, sample),
      id: sm.sample_index[sample] ?? null,
      group: sm.group_index[sample] ?? null,
      source: sourceOf(data, sample),
      status: statusOf(data, sample),
      reward: Number.isFinite(data.smpReward[sample]) ? data.smpReward[sample] : null,
      label: sm.label[sample] ?? null,
      attempts: data.smpAttempts[sample],
      duration: data.smpEnd[sample] - data.smpStart[sample],
      trace_id: sm.trace_id[sample] ?? null,
    },
  };
  if (hit.type === "span" || hit.type === "segment") {
    const span = hit.span;
    out.name = nameOf(data, data.spanName[span]);
    out.start = data.spanStart[span];
    out.end = data.spanEnd[span];
    out.open = !!(data.spanFlags[span] & F_OPEN);
    out.attempt = data.spanAttempt[span];
    if (hit.type === "segment") out.segment = { name: nameOf(data, data.segName[hit.seg]), start: data.segStart[hit.seg], end: data.segEnd[hit.seg] };
  } else if (hit.type === "event") {
    out.name = nameOf(data, data.evName[hit.ev]);
    out.ts = data.evTs[hit.ev];
    out.kind = data.evKind[hit.ev] === EV_UNMATCHED ? "unmatched end" : "instant";
    out.count = hit.count;
  }
  return out;
}

/**
 * Fill the tooltip for a label, span, segment or event hit.
 * @param {HTMLElement} tt
 * @param {Data} data
 * @param {Hit} hit
 */
export function fillTooltip(tt, data, hit) {
  tt.replaceChildren();
  /** @param {string} label @param {string} value */
  const line = (label, value) => {
    const row = el("div", "stw-tt-row");
    row.appendChild(el("span", "stw-tt-k", label));
    row.appendChild(el("span", "stw-tt-v", value));
    tt.appendChild(row);
  };
  const sum = localSummary(data, hit);
  const sample = "sample" in hit ? hit.sample : -1;
  const sampleLine = () => {
    line("sample", sum.sample.id === null ? `row ${sum.sample.row}` : String(sum.sample.id));
    line("source", sum.sample.source || "—");
  };
  if (hit.type === "label") {
    tt.appendChild(el("div", "stw-tt-title", sampleLabel(data, sample)));
    line("status", sum.sample.status || "—");
    if (data.smpFate[sample] < FATES.length) line("fate", FATE_LABELS[FATES[data.smpFate[sample]]] ?? "—");
    line("reward", sum.sample.reward !== null ? formatNumber(sum.sample.reward) : "—");
    line("duration", formatDuration(sum.sample.duration));
    line("lanes", String(data.nLanes[sample]));
    if (data.smpOpen[sample]) line("open spans", String(data.smpOpen[sample]));
    const lab = sum.sample.label;
    if (lab) line("label", lab.length > 120 ? lab.slice(0, 120) + "…" : lab);
    if (data.nLanes[sample] > 1) tt.appendChild(el("div", "stw-tt-hint", "click to expand / collapse"));
    return;
  }
  if (hit.type === "span") {
    const fl = data.spanFlags[hit.span];
    tt.appendChild(el("div", "stw-tt-title", sum.name));
    sampleLine();
    line("attempt", String(sum.attempt));
    const parent = data.spanParent[hit.span];
    line("parent", parent >= 0 ? nameOf(data, data.spanName[parent]) : "—");
    line("start", formatDuration(sum.start));
    line(sum.open ? "display end" : "end", formatDuration(sum.end));
    const recorded = data.spanDur[hit.span]; // the drawn end never precedes the start
    line("duration", formatDuration(!sum.open && Number.isFinite(recorded) ? recorded : sum.end - sum.start));
    if (sum.open) line("state", `open (clipped at ${CLIP_REASONS[clipReasonOf(fl)] || "display end"})`);
    if (fl & F_ERROR) line("error", "yes");
    if (fl & F_VIRTUAL) line("PD", "virtual lane");
    return;
  }
  if (hit.type === "segment") {
    const seg = sum.segment;
    tt.appendChild(el("div", "stw-tt-title", `${sum.name} ${seg.name}`));
    sampleLine();
    line("attempt", String(sum.attempt));
    const parent = data.spanParent[hit.span];
    line("parent", parent >= 0 ? nameOf(data, data.spanName[parent]) : "—");
    line("start", formatDuration(seg.start));
    line("end", formatDuration(seg.end));
    const dur = seg.end - seg.start;
    const vd = sum.end - sum.start;
    line("duration", `${formatDuration(dur)}${vd > 0 ? ` (${((dur / vd) * 100).toFixed(1)}% of ${sum.name})` : ""}`);
    return;
  }
  if (hit.type === "event") {
    const ev = hit.ev;
    const unmatched = sum.kind === "unmatched end";
    if (hit.count > 1) {
      const counts = new Map();
      for (const member of hit.members) counts.set(nameOf(data, data.evName[member]), (counts.get(nameOf(data, data.evName[member])) || 0) + 1);
      tt.appendChild(el("div", "stw-tt-title", `${hit.count} ${unmatched ? "unmatched ends" : "events"}`));
      for (const [name, count] of [...counts].slice(0, 8)) line(name, `×${count}`);
      const ts = hit.members.map((member) => data.evTs[member]);
      sampleLine();
      line("from", formatDuration(Math.min(...ts)));
      line("to", formatDuration(Math.max(...ts)));
      tt.appendChild(el("div", "stw-tt-hint", "zoom in to separate them"));
      return;
    }
    tt.appendChild(el("div", "stw-tt-title", unmatched ? `unmatched end: ${sum.name}` : sum.name));
    sampleLine();
    line("attempt", String(data.evAttempt[ev]));
    const parent = data.evParent[ev];
    line("parent", parent >= 0 ? nameOf(data, data.spanName[parent]) : "—");
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
 * @param {Hit|null} first
 * @param {Hit|null} second
 */
export function sameHit(first, second) {
  if (first === second) return true;
  if (!first || !second || first.type !== second.type) return false;
  if (first.type === "span" && second.type === "span") return first.span === second.span;
  if (first.type === "segment" && second.type === "segment") return first.seg === second.seg;
  if (first.type === "event" && second.type === "event") return first.ev === second.ev && first.count === second.count;
  return false;
}

/**
 * Point the hover at `hit`: the item outlined, the row marked, the tooltip's
 * text and place, the pointer's shape. Returns whether the outline or the
 * marked row changed, i.e. whether a repaint is due.
 * @param {{hover: Hit|null, hoverRow: number}} pointer the hover, set here
 * @param {{tooltip: HTMLElement, canvas: HTMLElement, mainEl: HTMLElement}} ui
 * @param {Data} data
 * @param {Hit|null} hit
 * @param {number} clientX
 * @param {number} clientY
 */
export function pointAt(pointer, ui, data, hit, clientX, clientY) {
  const item = isItem(hit) ? hit : null;
  const row = hit && "row" in hit ? hit.row : -1;
  const same = sameHit(item, pointer.hover) && row === pointer.hoverRow;
  pointer.hover = item;
  pointer.hoverRow = row;
  if (!hit || (hit.type !== "label" && !item)) {
    ui.tooltip.hidden = true;
    ui.canvas.style.cursor = "";
    return !same;
  }
  ui.canvas.style.cursor = hit.type === "label" ? "pointer" : "";
  if (!same) fillTooltip(ui.tooltip, data, hit);
  placeTooltip(ui.tooltip, ui.mainEl, clientX, clientY);
  return !same;
}
