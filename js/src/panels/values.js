// JSON values and long texts in the details panel, as DOM: a collapsible
// key/value tree, strings cut with a "show all" control, the sample's texts
// fetched whole on demand, and copying to the clipboard. All data text goes
// through textContent.

import { formatNumber } from "../util/format.js";
import { el } from "../util/dom.js";
import { codePointLength } from "../util/text.js";

/** @typedef {import("../data/model.js").SampleTextReply} SampleTextReply */

/** Strings longer than this are cut with a "show all" control. */
export const TRUNCATE_AT = 300;

/**
 * A collapsible key/value tree of a JSON value.
 * @param {any} value
 * @param {number} depth
 * @returns {HTMLElement}
 */
export function renderValue(value, depth = 0) {
  if (value === null || value === undefined) return el("span", "stw-v-null", value === null ? "null" : "undefined");
  if (typeof value === "boolean") return el("span", "stw-v-bool", String(value));
  if (typeof value === "number") return el("span", "stw-v-num", Number.isFinite(value) ? formatNumberExact(value) : String(value));
  if (typeof value === "string") return renderString(value);
  if (Array.isArray(value) || typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((item, i) => /** @type {[string, any]} */ ([String(i), item])) : Object.entries(value);
    if (entries.length === 0) return el("span", "stw-v-null", Array.isArray(value) ? "[]" : "{}");
    const det = /** @type {HTMLDetailsElement} */ (el("details", "stw-tree"));
    det.open = depth < 1 && entries.length <= 30;
    const sum = el("summary", "stw-tree-sum", Array.isArray(value) ? `[${entries.length} items]` : `{${entries.length} keys}`);
    det.appendChild(sum);
    det.appendChild(renderEntries(entries, depth + 1));
    return det;
  }
  return el("span", "", String(value));
}

/** @param {number} value */
export function formatNumberExact(value) {
  return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(12)));
}

/**
 * @param {[string, any][]} entries
 * @param {number} depth
 */
export function renderEntries(entries, depth) {
  const box = el("div", "stw-kv");
  const max = 500;
  for (const [key, value] of entries.slice(0, max)) {
    box.appendChild(el("div", "stw-k", key));
    const cell = el("div", "stw-v");
    cell.appendChild(renderValue(value, depth));
    box.appendChild(cell);
  }
  if (entries.length > max) box.appendChild(el("div", "stw-more", `… ${entries.length - max} more (copy as JSON to see all)`));
  return box;
}

/**
 * A string, cut at TRUNCATE_AT characters with a control to show it all.
 * @param {string} value
 */
function renderString(value) {
  const span = el("span", "stw-v-str");
  if (value.length <= TRUNCATE_AT) {
    span.textContent = value;
    return span;
  }
  const text = el("span", "", value.slice(0, TRUNCATE_AT) + "…");
  const btn = el("button", "stw-link", `show all (${formatNumber(value.length)} chars)`);
  let full = false;
  btn.addEventListener("click", () => {
    full = !full;
    text.textContent = full ? value : value.slice(0, TRUNCATE_AT) + "…";
    btn.textContent = full ? "show less" : `show all (${formatNumber(value.length)} chars)`;
  });
  span.appendChild(text);
  span.appendChild(document.createTextNode(" "));
  span.appendChild(btn);
  return span;
}

/**
 * The line under a cut text saying how much of it is shown; "" when it is whole.
 * @param {string} text the text shown
 * @param {number|null|undefined} chars the whole text's length, in code points
 */
export function textNote(text, chars) {
  const shown = codePointLength(text);
  if (typeof chars !== "number" || chars <= shown) return "";
  return `first ${formatNumber(shown)} of ${formatNumber(chars)} characters, ${formatNumber(chars - shown)} left out`;
}

/**
 * One sample text: its name and size, the text as sent with the summary, and
 * when that is cut a "show all" control that fetches the whole text (then
 * toggles between the two).
 * @param {string} field
 * @param {string} preview
 * @param {number|null} chars
 * @param {(field: string) => Promise<SampleTextReply>} fetchText
 * @param {string} cutWhere what to say when even the whole text came back cut
 */
export function renderSampleText(field, preview, chars, fetchText, cutWhere) {
  const box = el("div", "stw-text-field");
  const head = el("div", "stw-text-head");
  head.appendChild(el("span", "stw-k", field));
  if (typeof chars === "number") head.appendChild(el("span", "stw-text-size", `${formatNumber(chars)} chars`));
  box.appendChild(head);
  const empty = preview === "" && !chars; // a snapshot of many texts may preview none of one
  const body = el("div", empty ? "stw-v stw-text stw-empty" : "stw-v stw-text", empty ? "(empty)" : preview);
  box.appendChild(body);
  const previewNote = textNote(preview, chars);
  if (!previewNote) return box;
  const foot = el("div", "stw-text-foot");
  const note = el("span", "stw-text-note", previewNote);
  const btn = /** @type {HTMLButtonElement} */ (el("button", "stw-link", "show all"));
  foot.appendChild(note);
  foot.appendChild(document.createTextNode(" "));
  foot.appendChild(btn);
  box.appendChild(foot);
  /** @type {string|null} fetched on the first "show all", kept for the next */
  let whole = null;
  let expanded = false;
  /**
   * @param {string} text
   * @param {string} noteText
   */
  const show = (text, noteText) => {
    body.textContent = text;
    note.textContent = noteText;
    btn.textContent = expanded ? "show less" : "show all";
  };
  const showWhole = (/** @type {string} */ text) => {
    const left = textNote(text, chars);
    show(text, left && `${left} ${cutWhere}`);
  };
  btn.addEventListener("click", async () => {
    expanded = !expanded;
    if (!expanded) return show(preview, previewNote);
    if (whole !== null) return showWhole(whole);
    btn.disabled = true;
    btn.textContent = "loading…";
    try {
      const reply = await fetchText(field);
      if (typeof reply.text !== "string") throw new Error(reply.error || "no text in the reply");
      whole = reply.text;
      showWhole(whole);
    } catch (err) {
      expanded = false;
      show(preview, `${previewNote}; could not load the rest: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      btn.disabled = false;
    }
  });
  return box;
}

/**
 * Copy text to the clipboard; never throws. Resolves to true on success.
 * @param {string} text
 */
export async function copyText(text) {
  try {
    if (typeof navigator !== "undefined" && navigator.clipboard && navigator.clipboard.writeText) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    /* fall through to the textarea path */
  }
  try {
    const ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.style.position = "fixed";
    ta.style.left = "-9999px";
    document.body.appendChild(ta);
    ta.select();
    const ok = document.execCommand("copy");
    ta.remove();
    return !!ok;
  } catch {
    return false;
  }
}
