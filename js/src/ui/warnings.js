// The loader's warnings (`meta.warnings`: what it skipped or repaired in the dump,
// counted by kind, docs/payload.md): a notice in the title bar that counts them,
// lists them on hover and, clicked, under it. Kinds come from the payload, so they
// reach the page as text only.

import { el } from "../util/dom.js";
import { formatNumber } from "../util/format.js";

/**
 * @typedef {Object} WarningsText
 * @property {string} summary the notice, e.g. "⚠ 6 load warnings"
 * @property {string} title its hover text: what the warnings are, then one line per kind
 * @property {string[]} lines "kind: count", most first
 */

/** What the warnings are, at the head of the hover text. */
export const WARNINGS_ABOUT = "The loader skipped or repaired these records of the dump:";

/**
 * The notice's texts for `counts` (kind -> count), or null when there is nothing to say.
 * @param {Record<string, number>} counts
 * @returns {WarningsText|null}
 */
export function warningsText(counts) {
  const kinds = Object.entries(counts)
    .filter(([, count]) => Number.isFinite(count) && count > 0)
    .sort((first, second) => second[1] - first[1] || (first[0] < second[0] ? -1 : first[0] > second[0] ? 1 : 0));
  if (!kinds.length) return null;
  const total = kinds.reduce((sum, [, count]) => sum + count, 0);
  const lines = kinds.map(([kind, count]) => `${kind}: ${formatNumber(count)}`);
  return {
    summary: `⚠ ${formatNumber(total)} load warning${total === 1 ? "" : "s"}`,
    title: [WARNINGS_ABOUT, ...lines].join("\n"),
    lines,
  };
}

/** The title bar's notice: hidden when the payload has no warnings. */
export class WarningsNotice {
  constructor() {
    this.el = /** @type {HTMLDetailsElement} */ (el("details", "stw-warnings"));
    this.summary = el("summary", "stw-warnings-summary");
    this.list = el("ul", "stw-warnings-list");
    this.el.appendChild(this.summary);
    this.el.appendChild(this.list);
    this.el.hidden = true;
    /** the counts shown, as text (nothing is rebuilt while they stay) */
    this.shown = "";
  }

  /** @param {Record<string, number>} counts `meta.warnings` */
  update(counts) {
    const text = warningsText(counts);
    const key = text ? text.title : "";
    if (key === this.shown) return;
    this.shown = key;
    this.el.hidden = !text;
    this.el.open = false;
    this.summary.textContent = text ? text.summary : "";
    this.el.title = text ? text.title : "";
    this.list.replaceChildren(...(text ? text.lines.map((line) => el("li", "", line)) : []));
  }
}
