// Legend: span names with their colours (most used first; click one to
// highlight it), PD phase colours, instant-event names, the samples' fates
// with their counts (while rows are coloured by fate), and a key for the
// markers (instant event, cluster, unmatched end, open span, error).

import { F_ENGINE, F_ERROR, F_OPEN, F_PD_DETAIL, F_VIRTUAL, EV_INSTANT, PD_DECODE, nameOf } from "../data/decode.js";
import { colorForName, colorForSegment, enginePhaseColor, fateColor } from "../render/colors.js";
import { FATES, FATE_LABELS, FATE_MEANINGS } from "../data/fates.js";
import { el } from "../util/dom.js";

/** @typedef {import("../data/decode.js").Data} Data */

/**
 * @typedef {Object} LegendInfo
 * @property {{name: number, count: number}[]} spans drawable span names, most used first
 * @property {{name: number, count: number}[]} engine names of the engine's spans, most used first
 * @property {{name: number, count: number, phase: number}[]} segments PD segment names, each with the PD phase of its spans (pipeline order)
 * @property {{name: number, count: number}[]} events instant event names
 * @property {boolean} hasOpen
 * @property {boolean} hasUnmatched
 * @property {boolean} hasError
 */

/**
 * Count name usage once per payload.
 * @param {Data} data
 * @returns {LegendInfo}
 */
export function legendInfo(data) {
  const size = data.names.length + 1;
  const sp = new Uint32Array(size);
  const en = new Uint32Array(size);
  const sg = new Uint32Array(size);
  const ev = new Uint32Array(size);
  let hasOpen = false;
  let hasError = false;
  let hasUnmatched = false;
  for (let i = 0; i < data.nSpans; i++) {
    const fl = data.spanFlags[i];
    if (fl & (F_PD_DETAIL | F_VIRTUAL)) continue;
    (fl & F_ENGINE ? en : sp)[Math.min(data.spanName[i], size - 1)]++;
    if (fl & F_OPEN) hasOpen = true;
    if (fl & F_ERROR) hasError = true;
  }
  for (let i = 0; i < data.nSegs; i++) sg[Math.min(data.segName[i], size - 1)]++;
  for (let i = 0; i < data.nEvents; i++) {
    if (data.evKind[i] === EV_INSTANT) ev[Math.min(data.evName[i], size - 1)]++;
    else hasUnmatched = true;
  }
  const list = (/** @type {Uint32Array} */ counts) => {
    /** @type {{name: number, count: number}[]} */
    const out = [];
    for (let i = 0; i < counts.length; i++) if (counts[i]) out.push({ name: i, count: counts[i] });
    return out.sort((first, second) => second.count - first.count || first.name - second.name);
  };
  const counted = list(sg);
  const order = pipelineOrder(data, counted.map((entry) => entry.name), size);
  const segs = counted.map((entry) => ({ ...entry, phase: order.phaseOf(entry.name) }));
  segs.sort(order.compare);
  return { spans: list(sp), engine: list(en), segments: segs, events: list(ev), hasOpen, hasUnmatched, hasError };
}

/**
 * How PD segment names sort in the pipeline, as the data records it: by the phase
 * of their span (prefill before decode; `phaseOf` a name), then by how the spans
 * order them: name a before name b when more spans hold a segment of a before one
 * of b (in time) than the other way round; names no span holds together keep the
 * order of their ids. A span that lacks a step moves no other, and no step is
 * listed here.
 * @param {Data} data
 * @param {number[]} names the segment name ids to sort
 * @param {number} size name ids, the last for any out of range
 * @returns {{compare: (first: {name: number}, second: {name: number}) => number, phaseOf: (name: number) => number}}
 */
function pipelineOrder(data, names, size) {
  const slot = new Map(names.map((name, at) => [name, at]));
  const count = names.length;
  const phase = new Float64Array(count).fill(Infinity);
  const before = new Uint32Array(count * count); // [a * count + b]: spans with a before b
  /** @type {number[]} */
  const held = [];
  for (let span = 0; span < data.nSpans; span++) {
    held.length = 0;
    for (let position = data.spanSegOff[span]; position < data.spanSegOff[span + 1]; position++) {
      const at = slot.get(Math.min(data.segName[data.segOrder[position]], size - 1));
      if (at === undefined) continue;
      phase[at] = Math.min(phase[at], data.spanPd[span]);
      for (const earlier of held) if (earlier !== at) before[earlier * count + at]++;
      held.push(at);
    }
  }
  return {
    compare: (first, second) => {
      const a = /** @type {number} */ (slot.get(first.name));
      const b = /** @type {number} */ (slot.get(second.name));
      return phase[a] - phase[b] || before[b * count + a] - before[a * count + b] || first.name - second.name;
    },
    phaseOf: (name) => phase[/** @type {number} */ (slot.get(name))],
  };
}

/**
 * Render the legend.
 * @param {HTMLElement} host
 * @param {Data} data
 * @param {LegendInfo} info
 * @param {number} highlight highlighted name index, -1 for none
 * @param {(name: number) => void} onClick
 * @param {number[]|null} [fates] samples per fate among the rows shown (FATES order), null while rows are not coloured by fate
 */
export function renderLegend(host, data, info, highlight, onClick, fates = null) {
  host.replaceChildren();
  const group = (/** @type {string} */ title) => {
    const container = el("div", "stw-legend-group");
    if (title) container.appendChild(el("span", "stw-legend-title", title));
    host.appendChild(container);
    return container;
  };
  /**
   * @param {HTMLElement} container
   * @param {number} name
   * @param {string} color
   * @param {string} text
   * @param {number} count
   * @param {string} shape
   */
  const item = (container, name, color, text, count, shape) => {
    const button = el("button", "stw-legend-item");
    if (highlight >= 0) button.classList.add(highlight === name ? "stw-active" : "stw-dim");
    const sw = el("span", shape);
    sw.style.background = color;
    button.appendChild(sw);
    button.appendChild(el("span", "stw-legend-text", text.length > 48 ? text.slice(0, 47) + "…" : text));
    button.title = `${text}: ${count.toLocaleString("en-US")} — click to highlight`;
    button.addEventListener("click", () => onClick(name));
    container.appendChild(button);
  };
  const MAX = 24;
  const names = (/** @type {string} */ title, /** @type {{name: number, count: number}[]} */ entries) => {
    if (!entries.length) return;
    const container = group(title);
    for (const entry of entries.slice(0, MAX)) {
      const nm = nameOf(data, entry.name);
      item(container, entry.name, colorForName(nm), nm, entry.count, "stw-swatch");
    }
    if (entries.length > MAX) container.appendChild(el("span", "stw-legend-more", `+${entries.length - MAX} more`));
  };
  names("", info.spans);
  names("engine (SGLang's own trace of each request)", info.engine);
  if (data.hasEngine) {
    const container = group("engine band (collapsed rows, under the bars)");
    for (const phase of [...data.bandPhases].reverse()) {
      const chip = el("span", "stw-key");
      const sw = el("span", "stw-swatch stw-band-swatch");
      sw.style.background = enginePhaseColor(phase);
      chip.appendChild(sw);
      chip.appendChild(document.createTextNode(phase));
      chip.title = phase === "other" ? "in the engine, in no slice of a known phase" : `slices: ${(data.meta.engine_phases[phase] ?? []).join(", ")}`;
      container.appendChild(chip);
    }
  }
  if (info.segments.length) {
    const container = group("PD (collapsed: thin band, P over D; expanded: [P]/[D] lanes)");
    for (const entry of info.segments.slice(0, MAX)) {
      const nm = nameOf(data, entry.name);
      const phase = entry.phase === PD_DECODE ? "[D]" : "[P]"; // of the spans that hold it
      item(container, entry.name, colorForSegment(nm), `${phase} ${nm.replace(/^(sglang_)?(pd_)?(prefill_|decode_)?/, "")}`, entry.count, "stw-swatch");
    }
  }
  if (info.events.length) {
    const container = group("events");
    for (const entry of info.events.slice(0, 12)) {
      const nm = nameOf(data, entry.name);
      item(container, entry.name, colorForName(nm), nm, entry.count, "stw-diamond");
    }
    if (info.events.length > 12) container.appendChild(el("span", "stw-legend-more", `+${info.events.length - 12} more`));
  }
  if (fates) {
    const container = group("fate");
    container.classList.add("stw-legend-fates");
    FATES.forEach((fate, k) => {
      const chip = el("span", "stw-key stw-fate-key");
      chip.dataset.fate = fate;
      const sw = el("span", "stw-swatch");
      sw.style.background = fateColor(fate);
      chip.appendChild(sw);
      chip.appendChild(el("span", "stw-legend-text", FATE_LABELS[fate] ?? fate));
      chip.appendChild(el("span", "stw-fate-count", (fates[k] ?? 0).toLocaleString("en-US")));
      chip.title = `${FATE_LABELS[fate] ?? fate}: ${FATE_MEANINGS[fate] ?? ""} (${(fates[k] ?? 0).toLocaleString("en-US")} of the rows shown)`;
      container.appendChild(chip);
    });
  }
  const key = group("");
  key.classList.add("stw-legend-key");
  const addKey = (/** @type {string} */ cls, /** @type {string} */ text, /** @type {string} */ tip) => {
    const chip = el("span", "stw-key");
    chip.appendChild(el("span", cls));
    chip.appendChild(document.createTextNode(text));
    chip.title = tip;
    key.appendChild(chip);
  };
  addKey("stw-key-cluster", "cluster", "instant events closer than a few pixels, drawn as one badge with their count");
  if (info.hasOpen) addKey("stw-key-open", "open span", "a span with no end record, drawn dashed up to where it was clipped");
  if (info.hasUnmatched) addKey("stw-key-unmatched", "unmatched end", "an end record whose start is missing");
  if (info.hasError) addKey("stw-key-error", "error", "the span ended with an error");
}
