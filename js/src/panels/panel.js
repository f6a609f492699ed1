// Details panel (DOM) for the clicked item: sample summary and texts, timing,
// parent, PD phase breakdown, start/end attributes as a collapsible key/value
// tree, copy as JSON. All data text goes through textContent.

import CONTRACT from "../../../slime_trace_widget/view/payload_contract.json" with { type: "json" };
import { F_OPEN, F_VIRTUAL, F_ERROR, F_PD_DETAIL, PD_DECODE, CLIP_REASONS, clipReasonOf, nameOf, sampleLabel, statusOf, sourceOf, EV_UNMATCHED } from "../data/decode.js";
import { formatDuration, formatEpoch, formatMs, formatPct } from "../util/format.js";
import { colorForName, colorForSegment } from "../render/colors.js";
import { el } from "../util/dom.js";
import { localSummary } from "../ui/tooltip.js";
import { linksOf, describe, endOfHit, filteredOut } from "../data/links.js";
import { enginePhases } from "../data/engine.js";
import { renderEnginePhases } from "./engine_panel.js";
import { shareRow, shareTable } from "./shares.js";
import { copyText, formatNumberExact, renderEntries, renderSampleText, renderValue } from "./values.js";
import { FATES, FATE_LABELS } from "../data/fates.js";
import { isItem } from "../render/hit.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../render/hit.js").Hit} Hit */
/** @typedef {import("../render/hit.js").ItemHit} ItemHit */
/** @typedef {import("../data/model.js").SampleTextReply} SampleTextReply */

/**
 * Sample texts shown under the sample summary, in this order (the contract's
 * `sample_text_fields`). The kernel sends the start of each (`<field>` in the
 * summary) with its length (`<field>_chars`); "show all" asks for the rest.
 */
export const SAMPLE_TEXT_FIELDS = CONTRACT.sample_text_fields;

/**
 * @typedef {Object} DetailState
 * @property {"loading"|"ok"|"error"} status
 * @property {Record<string, any>|null} detail
 * @property {string} [error]
 * @property {HTMLElement} [engineBox] the "Engine vs slime" section (engine_figures.js), filled as its attributes arrive
 */

/**
 * @typedef {Object} PanelActions
 * @property {() => void} close
 * @property {() => void} focus
 * @property {(span: number) => void} selectSpan internal span index
 * @property {(ev: number) => void} [selectEvent] internal event index
 * @property {(field: string) => Promise<SampleTextReply>} sampleText the selected sample's whole text `field`
 */

/**
 * PD phases of a span from the payload: the segments of its virtual [P]/[D]
 * children (or of itself when it is virtual, or of a segment's span and its
 * sibling).
 * @param {Data} data
 * @param {number} span internal index
 * @returns {{phase: "P"|"D", name: string, dur: number}[]}
 */
export function pdBreakdown(data, span) {
  if (span < 0 || span >= data.nSpans) return [];
  const sample = data.spanSample[span];
  /** @type {number[]} */
  let virt = [];
  const fl = data.spanFlags[span];
  if (fl & F_VIRTUAL) {
    const parent = data.spanParent[span];
    virt = parent >= 0 ? childrenVirtual(data, sample, parent) : [span];
    if (!virt.includes(span)) virt.push(span);
  } else {
    virt = childrenVirtual(data, sample, span);
    if (virt.length === 0 && fl & F_PD_DETAIL) {
      // A PD-detail span: climb to the generation span.
      let ancestor = data.spanParent[span];
      while (ancestor >= 0 && data.spanFlags[ancestor] & F_PD_DETAIL) ancestor = data.spanParent[ancestor];
      if (ancestor >= 0) virt = childrenVirtual(data, sample, ancestor);
    }
  }
  virt.sort((first, second) => data.spanPd[first] - data.spanPd[second] || data.spanStart[first] - data.spanStart[second]);
  /** @type {{phase: "P"|"D", name: string, dur: number}[]} */
  const out = [];
  for (const virtualSpan of virt) {
    const phase = data.spanPd[virtualSpan] === PD_DECODE ? "D" : "P";
    for (let orderIndex = data.spanSegOff[virtualSpan]; orderIndex < data.spanSegOff[virtualSpan + 1]; orderIndex++) {
      const seg = data.segOrder[orderIndex];
      out.push({ phase, name: nameOf(data, data.segName[seg]), dur: Math.max(0, data.segEnd[seg] - data.segStart[seg]) });
    }
  }
  return out;
}

/**
 * @param {Data} data
 * @param {number} sample
 * @param {number} parent
 */
function childrenVirtual(data, sample, parent) {
  /** @type {number[]} */
  const out = [];
  for (let i = data.spanOff[sample]; i < data.spanOff[sample + 1]; i++) if (data.spanFlags[i] & F_VIRTUAL && data.spanParent[i] === parent) out.push(i);
  return out;
}

/**
 * PD phases from the kernel's `segments` detail (list of {name, start, end}
 * or {name, duration}), when present: the segments of one virtual span, so all of
 * that span's `phase`.
 * @param {any} segs
 * @param {"P"|"D"} phase
 * @returns {{phase: "P"|"D", name: string, dur: number}[]|null}
 */
export function pdFromDetail(segs, phase) {
  if (!Array.isArray(segs) || segs.length === 0) return null;
  /** @type {{phase: "P"|"D", name: string, dur: number}[]} */
  const out = [];
  for (const entry of segs) {
    if (!entry || typeof entry !== "object") continue;
    const name = String(entry.name ?? entry.segment ?? "?");
    let dur = Number(entry.duration ?? entry.dur ?? NaN);
    if (!Number.isFinite(dur)) dur = Number(entry.end) - Number(entry.start);
    if (!Number.isFinite(dur)) continue;
    out.push({ phase, name, dur: Math.max(0, dur) });
  }
  return out.length ? out : null;
}

/**
 * A section with a title.
 * @param {HTMLElement} host
 * @param {string} title
 */
function section(host, title) {
  const sec = el("div", "stw-sec");
  sec.appendChild(el("div", "stw-sec-title", title));
  host.appendChild(sec);
  return sec;
}

/**
 * Key/value rows.
 * @param {HTMLElement} host
 * @param {[string, string | HTMLElement][]} rows
 */
function kvRows(host, rows) {
  const box = el("div", "stw-kv");
  for (const [key, value] of rows) {
    box.appendChild(el("div", "stw-k", key));
    const cell = el("div", "stw-v");
    if (typeof value === "string") cell.textContent = value;
    else cell.appendChild(value);
    box.appendChild(cell);
  }
  host.appendChild(box);
  return box;
}

/**
 * Render the details panel: the header, the sample, the item's timing, its
 * links, its phases and its attributes.
 * @param {HTMLElement} host
 * @param {Data} data
 * @param {Hit} hit span, segment or event selection
 * @param {number} detailSpan internal span index the attributes belong to (-1 for events)
 * @param {DetailState} st
 * @param {PanelActions} act
 */
export function renderDetails(host, data, hit, detailSpan, st, act) {
  host.replaceChildren();
  if (!isItem(hit)) return;
  const detail = st.status === "ok" ? st.detail : null;
  renderHeader(host, data, hit, detail, act);
  renderSample(host, data, hit.sample, detail, act);
  const timing = section(host, hit.type === "event" ? "Event" : hit.type === "segment" ? "PD phase" : "Span");
  kvRows(timing, hit.type === "event" ? eventRows(data, hit, detail, act) : spanRows(data, hit, detail, act));
  renderLinks(host, data, hit, act);
  if (hit.type !== "event") renderPhases(host, data, hit, detailSpan, detail, st);
  if (hit.type === "event") {
    renderAttrs(host, "Attributes", detail && "attrs" in detail ? "attrs" : "start_attrs", detail, st);
  } else {
    renderAttrs(host, "Start attributes", "start_attrs", detail, st);
    renderAttrs(host, "End attributes", "end_attrs", detail, st);
  }
}

/**
 * What the selection is called and what kind of item it is.
 * @param {Data} data
 * @param {ItemHit} hit
 * @returns {{title: string, kind: string}}
 */
function itemTitle(data, hit) {
  if (hit.type === "event") {
    const kind = data.evKind[hit.ev] === EV_UNMATCHED ? "unmatched end" : hit.count > 1 ? `${hit.count} events` : "event";
    return { title: nameOf(data, data.evName[hit.ev]), kind };
  }
  if (hit.type === "segment") return { title: nameOf(data, data.segName[hit.seg]), kind: "PD phase" };
  return { title: nameOf(data, data.spanName[hit.span]), kind: data.spanFlags[hit.span] & F_VIRTUAL ? "PD lane" : "span" };
}

/**
 * The panel's head: the kind, the focus, copy and close buttons, the title with
 * its colour, the copy message and the sample's label.
 * @param {HTMLElement} host
 * @param {Data} data
 * @param {ItemHit} hit
 * @param {any} detail the kernel's details, or null
 * @param {PanelActions} act
 */
function renderHeader(host, data, hit, detail, act) {
  const { title, kind } = itemTitle(data, hit);
  const heading = el("div", "stw-panel-title stw-wrap");
  const sw = el("span", "stw-swatch");
  sw.style.background = hit.type === "segment" ? colorForSegment(title) : colorForName(title);
  heading.appendChild(sw);
  heading.appendChild(document.createTextNode(title));
  const head = el("div", "stw-panel-head");
  head.appendChild(el("span", "stw-badge", kind));
  const btns = el("div", "stw-panel-btns");
  const focus = el("button", "stw-btn", "focus");
  focus.title = "zoom to this item (F)";
  focus.addEventListener("click", act.focus);
  const copy = el("button", "stw-btn", "copy JSON");
  copy.title = "copy the details as JSON";
  const copyMsg = el("div", "stw-copy-msg");
  copy.addEventListener("click", () => copyDetails(copyMsg, detail ? { ...localSummary(data, hit), detail } : localSummary(data, hit)));
  const close = el("button", "stw-btn stw-icon-btn", "×");
  close.title = "close (Esc)";
  close.addEventListener("click", act.close);
  btns.appendChild(focus);
  btns.appendChild(copy);
  btns.appendChild(close);
  head.appendChild(btns);
  host.appendChild(head);
  host.appendChild(heading);
  host.appendChild(copyMsg);
  host.appendChild(el("div", "stw-panel-sub", sampleLabel(data, hit.sample)));
}

/**
 * Copy the details as JSON; where the clipboard is out of reach, show the text to
 * copy by hand in ``copyMsg``.
 * @param {HTMLElement} copyMsg
 * @param {object} details
 */
async function copyDetails(copyMsg, details) {
  let text = "";
  try {
    text = JSON.stringify(details, null, 2);
  } catch (err) {
    text = String(err);
  }
  const ok = await copyText(text);
  copyMsg.replaceChildren();
  if (ok) {
    copyMsg.textContent = "copied";
    setTimeout(() => (copyMsg.textContent = ""), 1500);
  } else {
    copyMsg.textContent = "could not reach the clipboard: select and copy the text below";
    const ta = /** @type {HTMLTextAreaElement} */ (el("textarea", "stw-copy-area"));
    ta.value = text;
    ta.readOnly = true;
    copyMsg.appendChild(ta);
    ta.select();
  }
}

/**
 * The "Sample" section: the payload's values first, the kernel's when they
 * arrive, then the sample's texts (the label is in the payload, so it shows
 * before the kernel's reply).
 * @param {HTMLElement} host
 * @param {Data} data
 * @param {number} sample
 * @param {any} detail the kernel's details, or null
 * @param {PanelActions} act
 */
function renderSample(host, data, sample, detail, act) {
  const sm = data.meta.samples;
  const ks = detail && detail.sample && typeof detail.sample === "object" ? detail.sample : {};
  const pick = (/** @type {string} */ key, /** @type {any} */ fallback) => (key in ks && ks[key] !== undefined ? ks[key] : fallback);
  const reward = pick("reward", Number.isFinite(data.smpReward[sample]) ? data.smpReward[sample] : null);
  const sec = section(host, "Sample");
  kvRows(sec, [
    ["id", String(pick("id", sm.sample_index[sample] ?? "—"))],
    ["group", String(pick("group", sm.group_index[sample] ?? "—"))],
    ["source", String(pick("source", sourceOf(data, sample)))],
    ["status", String(pick("status", statusOf(data, sample)))],
    ...(/** @type {[string, string][]} */ (data.hasFates ? [["fate", FATE_LABELS[FATES[data.smpFate[sample]]] ?? "—"]] : [])),
    ["reward", reward === null || typeof reward !== "object" ? (typeof reward === "number" ? formatNumberExact(reward) : String(reward ?? "—")) : renderValue(reward, 1)],
    ["attempts", String(pick("attempts", data.smpAttempts[sample]))],
    ["duration", formatDuration(typeof ks.duration === "number" ? ks.duration : data.smpEnd[sample] - data.smpStart[sample])],
    ["trace id", String(sm.trace_id[sample] ?? "—")],
  ]);
  const texts = { ...ks, label: pick("label", sm.label[sample] ?? null) };
  const cutWhere = data.meta.attrs_embedded ? "(the rest is not in this snapshot)" : "(the rest is in the widget's .samples table)";
  for (const field of SAMPLE_TEXT_FIELDS) {
    const text = texts[field];
    const chars = texts[`${field}_chars`];
    if (typeof text !== "string") continue;
    sec.appendChild(renderSampleText(field, text, typeof chars === "number" ? chars : null, act.sampleText, cutWhere));
  }
}

/**
 * A payload time as epoch seconds: the kernel's own value when it has one.
 * @param {Data} data
 * @param {number} sample
 * @param {number} relative seconds from the payload's t0, before the sample's offset
 */
function epochOf(data, sample, relative) {
  return data.meta.t0 + relative + (data.smpOffset[sample] || 0);
}

/**
 * The timing rows of an event (or a cluster of events).
 * @param {Data} data
 * @param {Hit & {type: "event"}} hit
 * @param {any} detail the kernel's details, or null
 * @param {PanelActions} act
 * @returns {[string, string|HTMLElement][]}
 */
function eventRows(data, hit, detail, act) {
  const ts = data.evTs[hit.ev];
  /** @type {[string, string|HTMLElement][]} */
  const rows = [
    ["time", `${formatDuration(ts)}  (${formatEpoch(typeof detail?.ts === "number" ? detail.ts : epochOf(data, hit.sample, ts))})`],
    ["kind", data.evKind[hit.ev] === EV_UNMATCHED ? "unmatched end (its start is missing)" : "instant event"],
    ["attempt", String(data.evAttempt[hit.ev])],
  ];
  const parent = data.evParent[hit.ev];
  if (parent >= 0) rows.push(["parent", parentLink(data, parent, act)]);
  if (hit.count > 1) {
    const counts = new Map();
    for (const member of hit.members) counts.set(nameOf(data, data.evName[member]), (counts.get(nameOf(data, data.evName[member])) || 0) + 1);
    rows.push(["cluster", [...counts].map(([name, count]) => `${name} ×${count}`).join(", ")]);
    const times = hit.members.map((member) => data.evTs[member]);
    rows.push(["spread", formatDuration(Math.max(...times) - Math.min(...times))]);
  }
  return rows;
}

/**
 * The timing rows of a span or of one PD phase of its lane.
 * @param {Data} data
 * @param {Hit & {type: "span" | "segment"}} hit
 * @param {any} detail the kernel's details, or null
 * @param {PanelActions} act
 * @returns {[string, string|HTMLElement][]}
 */
function spanRows(data, hit, detail, act) {
  const span = hit.span;
  const isSpan = hit.type === "span";
  const start = hit.type === "segment" ? data.segStart[hit.seg] : data.spanStart[span];
  const end = hit.type === "segment" ? data.segEnd[hit.seg] : data.spanEnd[span];
  const fl = data.spanFlags[span];
  const open = !!(fl & F_OPEN);
  const epoch = (/** @type {string} */ key, /** @type {number} */ at) =>
    formatEpoch(isSpan && typeof detail?.[key] === "number" ? detail[key] : epochOf(data, hit.sample, at));
  // A closed span's recorded duration (the kernel's once its details arrive, else the
  // payload's float32 one), not end - start: the payload's times are float32 offsets
  // within the sample (a 300 µs span 2 h in read 488 µs), and its end is the drawn one
  // (never before the start, where a clock that stepped back put the end).
  const recorded = isSpan && !open ? (Number.isFinite(detail?.duration) ? Number(detail.duration) : data.spanDur[span]) : NaN;
  const exact = Number.isFinite(recorded) ? recorded : null;
  const shownEnd = exact === null ? end : start + exact;
  /** @type {[string, string|HTMLElement][]} */
  const rows = [
    ["start", `${formatDuration(start)}  (${epoch("start", start)})`],
    [open && isSpan ? "display end" : "end", `${formatDuration(shownEnd)}  (${epoch("end", end)})`],
    ["duration", formatDuration(exact ?? end - start) + (open && isSpan ? " (open: still running when the dump was taken)" : "")],
  ];
  if (isSpan) {
    const state = detail && typeof detail.state === "string" ? detail.state : open ? "open" : "closed";
    rows.push(["state", state + (fl & F_ERROR ? " · error" : "")]);
    const cr = detail && detail.clip_reason ? String(detail.clip_reason) : CLIP_REASONS[clipReasonOf(fl)];
    if (open && cr) rows.push(["clipped at", cr]);
  } else {
    rows.push(["lane", nameOf(data, data.spanName[span])]);
  }
  rows.push(["attempt", String(data.spanAttempt[span])]);
  const parent = data.spanParent[span];
  if (parent >= 0) rows.push(["parent", parentLink(data, parent, act)]);
  else if (detail && detail.parent_name) rows.push(["parent", String(detail.parent_name)]);
  if (detail && detail.span_id) rows.push(["span id", String(detail.span_id)]);
  return rows;
}

/**
 * The PD phases of a generation and the engine's phases of a request. The
 * payload knows both PD phases (and which is which); the kernel's `segments`
 * only fill in when the payload has none.
 * @param {HTMLElement} host
 * @param {Data} data
 * @param {Hit & {type: "span" | "segment"}} hit
 * @param {number} detailSpan
 * @param {any} detail the kernel's details, or null
 * @param {DetailState} st
 */
function renderPhases(host, data, hit, detailSpan, detail, st) {
  const fromPayload = pdBreakdown(data, detailSpan >= 0 ? detailSpan : hit.span);
  const ownPhase = detailSpan >= 0 && data.spanPd[detailSpan] === PD_DECODE ? "D" : "P";
  const phases = fromPayload.length ? fromPayload : (detail && pdFromDetail(detail.segments, ownPhase)) || [];
  if (phases.length) renderPd(section(host, "PD phases"), phases, hit.type === "segment" ? nameOf(data, data.segName[hit.seg]) : "");
  const engine = hit.type === "span" ? enginePhases(data, hit.span) : [];
  if (engine.length) renderEnginePhases(section(host, "Engine phases"), engine);
  if (st.engineBox) host.appendChild(st.engineBox);
}

/**
 * One attributes section: loading, not available, none, or the values.
 * @param {HTMLElement} host
 * @param {string} title
 * @param {string} key the details' field (``attrs``, ``start_attrs``, ``end_attrs``)
 * @param {any} detail the kernel's details, or null
 * @param {DetailState} st
 */
function renderAttrs(host, title, key, detail, st) {
  const sec = section(host, title);
  if (st.status === "loading") {
    sec.appendChild(el("div", "stw-loading", "loading…"));
    return;
  }
  if (st.status === "error" || !detail) {
    sec.appendChild(el("div", "stw-empty", st.error ? `not available: ${st.error}` : "not available"));
    return;
  }
  const value = detail[key];
  if (value === null || value === undefined || (typeof value === "object" && Object.keys(value).length === 0)) {
    sec.appendChild(el("div", "stw-empty", "none"));
    return;
  }
  if (typeof value === "object" && !Array.isArray(value)) sec.appendChild(renderEntries(Object.entries(value), 1));
  else sec.appendChild(renderValue(value, 1));
}

/** Group members listed as buttons; the rest are counted. */
const MAX_MEMBER_BUTTONS = 20;

/**
 * The "Links" section (links.js): "group: N other members" with a button per
 * member, "previous attempt", "continued remotely" and their reverses, each a
 * button that selects the other end.
 * @param {HTMLElement} host
 * @param {Data} data
 * @param {Hit} hit
 * @param {PanelActions} act
 */
function renderLinks(host, data, hit, act) {
  const self = endOfHit(hit);
  if (!self) return;
  const links = linksOf(data, self.kind, self.index);
  if (!links.length) return;
  /** @param {import("../data/links.js").End} end @param {string} text */
  const button = (end, text) => {
    const btn = /** @type {HTMLButtonElement} */ (el("button", "stw-link", text));
    if (filteredOut(data, end)) {
      btn.disabled = true;
      btn.title = "filtered out by the filter box's query";
      return btn;
    }
    btn.title = "select it";
    btn.addEventListener("click", () => {
      if (filteredOut(data, end)) return; // hidden since the panel was drawn
      if (end.kind === "span") act.selectSpan(end.index);
      else act.selectEvent?.(end.index);
    });
    return btn;
  };
  /** @param {import("../data/links.js").End} end */
  const where = (end) => {
    const name = end.kind === "span" ? data.spanName[end.index] : data.evName[end.index];
    const sample = end.kind === "span" ? data.spanSample[end.index] : data.evSample[end.index];
    return `${nameOf(data, name)} · ${sampleLabel(data, sample)}`;
  };
  /** @type {[string, string|HTMLElement][]} */
  const rows = [];
  const members = links.filter((link) => link.kind === "group");
  if (members.length) {
    const box = el("div", "stw-links");
    box.appendChild(el("div", "", `${members.length} other member${members.length === 1 ? "" : "s"}`));
    for (const link of members.slice(0, MAX_MEMBER_BUTTONS)) {
      box.appendChild(button(link.to, sampleLabel(data, data.spanSample[link.to.index])));
    }
    if (members.length > MAX_MEMBER_BUTTONS) box.appendChild(el("div", "", `and ${members.length - MAX_MEMBER_BUTTONS} more`));
    rows.push(["group", box]);
  }
  for (const link of links) {
    if (link.kind === "group") continue;
    const { label, target } = describe(link, self);
    rows.push([label, button(target, where(target))]);
  }
  kvRows(section(host, "Links"), rows);
}

/**
 * @param {Data} data
 * @param {number} parent
 * @param {PanelActions} act
 */
function parentLink(data, parent, act) {
  const btn = /** @type {HTMLButtonElement} */ (el("button", "stw-link", nameOf(data, data.spanName[parent])));
  if (filteredOut(data, { kind: "span", index: parent })) {
    btn.disabled = true;
    btn.title = "the parent span is filtered out by the filter box's query";
    return btn;
  }
  btn.title = "select the parent span";
  btn.addEventListener("click", () => filteredOut(data, { kind: "span", index: parent }) || act.selectSpan(parent));
  return btn;
}

/**
 * @param {HTMLElement} host
 * @param {{phase: "P"|"D", name: string, dur: number}[]} phases
 * @param {string} current
 */
function renderPd(host, phases, current) {
  const total = phases.reduce((sum, phase) => sum + phase.dur, 0) || 1;
  const { table, body: tb } = shareTable("stw-table", "phase");
  for (const phase of phases) {
    tb.appendChild(shareRow(`[${phase.phase}] ${phase.name}`, phase.dur, total, colorForSegment(phase.name),
      phase.name === current ? "stw-row-current" : ""));
  }
  const sums = { P: 0, D: 0 };
  for (const phase of phases) sums[phase.phase] += phase.dur;
  for (const ph of /** @type {const} */ (["P", "D"])) {
    if (!sums[ph]) continue;
    const tr = el("tr", "stw-row-total");
    tr.appendChild(el("td", "", ph === "P" ? "prefill total" : "decode total"));
    tr.appendChild(el("td", "stw-num", formatMs(sums[ph]).replace(" ms", "")));
    tr.appendChild(el("td", "stw-num", formatPct(sums[ph] / total)));
    tb.appendChild(tr);
  }
  host.appendChild(table);
}
