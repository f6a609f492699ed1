// The rollouts' ledger above the rows: per rollout shown, one horizontal bar
// stacked by what became of its samples (data/fates.js), each fate's part as
// wide as the seconds it took, labelled with its share; hover gives seconds
// and counts. With several rollouts compared, one bar per rollout. Built from
// DOM elements with text nodes only (rollout names come from the dump).

import { FATES, FATE_LABELS, FATE_MEANINGS, ledgerSegments, formatShare, formatSeconds } from "../data/fates.js";
import { fateColor, textOn } from "../render/colors.js";
import { el } from "../util/dom.js";
import { formatDuration, formatNumber } from "../util/format.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../data/fates.js").LedgerEntry} LedgerEntry */

/**
 * Fill `host` with one bar per rollout of the payload's ledger; hidden when it has none.
 * Segments carry `data-rollout` (index in meta.rollouts) and `data-fate` (the fate's name).
 * @param {HTMLElement} host
 * @param {Data} data
 */
export function renderLedgerBars(host, data) {
  host.replaceChildren();
  const entries = data.meta.ledger.entries;
  host.hidden = entries.length === 0;
  for (const entry of entries) {
    const name = data.meta.rollouts[entry.rollout] ?? `rollout ${entry.rollout}`;
    const total = entry.seconds.reduce((sum, value) => sum + value, 0);
    const count = entry.samples.reduce((sum, value) => sum + value, 0);
    const row = el("div", "stw-ledger-row");
    row.dataset.rollout = String(entry.rollout);
    const label = el("div", "stw-ledger-label");
    label.appendChild(el("span", "stw-ledger-name", name));
    label.appendChild(el("span", "stw-ledger-total", " · time by fate"));
    label.title = `${name}: ${formatDuration(total)} of sample time (each sample's duration, summed) in ${formatNumber(count)} samples, by what became of them\n${FATES.map((fate, k) => `${FATE_LABELS[fate]}: ${formatSeconds(entry.seconds[k])}, ${formatNumber(entry.samples[k])} samples`).join("\n")}`;
    const bar = el("div", "stw-ledger-bar");
    bar.setAttribute("role", "img");
    bar.setAttribute("aria-label", `${name} time by fate: ${ledgerSegments(entry).map((seg) => seg.label).join(", ") || "no time"}`);
    for (const seg of ledgerSegments(entry)) {
      const fate = FATES[seg.fate];
      const fill = fateColor(fate);
      const part = el("div", "stw-ledger-seg");
      part.dataset.rollout = String(entry.rollout);
      part.dataset.fate = fate;
      part.style.left = `${seg.from * 100}%`;
      part.style.width = `${(seg.to - seg.from) * 100}%`;
      part.style.background = fill;
      part.style.color = textOn(fill);
      part.appendChild(el("span", "stw-ledger-text", seg.label));
      bar.appendChild(part);
    }
    if (!(total > 0)) bar.appendChild(el("span", "stw-ledger-empty", "no sample time in this rollout"));
    row.appendChild(label);
    row.appendChild(bar);
    host.appendChild(row);
  }
}

/**
 * Hide the labels of segments too narrow to hold them whole (a cut share would mislead).
 * @param {HTMLElement} host
 */
export function fitLedgerLabels(host) {
  for (const segment of host.querySelectorAll(".stw-ledger-seg")) {
    const text = segment.firstElementChild;
    if (text instanceof HTMLElement) segment.classList.toggle("stw-ledger-tight", text.offsetWidth > segment.clientWidth);
  }
}

/**
 * The tooltip of one fate's segment: its seconds, share, samples and what it means.
 * @param {HTMLElement} tt
 * @param {Data} data
 * @param {LedgerEntry} entry
 * @param {number} fate index in FATES
 */
export function fillLedgerTooltip(tt, data, entry, fate) {
  tt.replaceChildren();
  const name = FATES[fate];
  const count = entry.samples.reduce((sum, value) => sum + value, 0);
  const total = entry.seconds.reduce((sum, value) => sum + value, 0);
  const share = entry.shares[fate] > 0 ? entry.shares[fate] : total > 0 ? entry.seconds[fate] / total : 0;
  tt.appendChild(el("div", "stw-tt-title", `${FATE_LABELS[name] ?? name}: ${formatShare(share)} of the time`));
  /** @param {string} label @param {string} value */
  const line = (label, value) => {
    const row = el("div", "stw-tt-row");
    row.appendChild(el("span", "stw-tt-k", label));
    row.appendChild(el("span", "stw-tt-v", value));
    tt.appendChild(row);
  };
  line("rollout", data.meta.rollouts[entry.rollout] ?? String(entry.rollout));
  line("time", `${formatSeconds(entry.seconds[fate])} of ${formatSeconds(total)}`);
  line("samples", `${formatNumber(entry.samples[fate])} of ${formatNumber(count)}`);
  tt.appendChild(el("div", "stw-tt-hint", FATE_MEANINGS[name] ?? ""));
}
