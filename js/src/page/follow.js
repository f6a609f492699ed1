// A followed run's page (`slime-trace-viewer --follow DIR`): the server rewrites
// the page and a small state file as slime writes new dumps. Served over http,
// the page polls that file and, when it has moved on, offers the update in a
// banner; the view (zoom, filters) is kept across the reload.

import { el } from "../util/dom.js";

/** @typedef {{state: string, version: number, run?: string}} FollowNote what the page was built from */
/** @typedef {{version: number, run?: string}} Shown the state a page shows: its serving process's run, and version */

const KEPT = "stw-follow-view";

/**
 * What the state file says beyond the page, or null when the page is current: a later
 * version of the same run, or any version of another run (the command was started
 * again, and counts its versions from 1 again).
 * @param {Shown} shown the page's
 * @param {unknown} state the parsed state file
 * @returns {{version: number, run?: string, dumps: number}|null}
 */
export function newerState(shown, state) {
  if (!state || typeof state !== "object") return null;
  const { version, dumps, run } = /** @type {any} */ (state);
  if (!Number.isInteger(version)) return null;
  const restarted = typeof run === "string" && typeof shown.run === "string" && run !== shown.run;
  if (!restarted && version <= shown.version) return null;
  return { version, run: typeof run === "string" ? run : shown.run, dumps: Number.isInteger(dumps) ? dumps : 0 };
}

/**
 * The view saved before an update's reload, once (null when there is none).
 * @param {Storage|undefined} storage
 * @returns {{view_state?: any, view_range?: number[]}|null}
 */
export function takeKeptView(storage) {
  try {
    const text = storage?.getItem(KEPT);
    storage?.removeItem(KEPT);
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

/**
 * Poll the state file every `intervalMs` and show the update banner in `host`.
 * @param {HTMLElement} host
 * @param {FollowNote} note
 * @param {{get: (name: string) => any}} model
 * @param {number} [intervalMs]
 * @returns {() => void} stops the polling
 */
export function followUpdates(host, note, model, intervalMs = 5000) {
  if (!/^https?:$/.test(location.protocol) || typeof note?.state !== "string") return () => {};
  const url = new URL(note.state, location.href);
  /** @type {Shown} */
  let shown = { version: note.version, run: note.run };
  let banner = /** @type {HTMLElement|null} */ (null);
  const look = async () => {
    try {
      const response = await fetch(url, { cache: "no-store" });
      const newer = response.ok ? newerState(shown, await response.json()) : null;
      if (!newer) return;
      shown = { version: newer.version, run: newer.run };
      banner ??= host.insertBefore(el("div", "stw-banner stw-follow-banner"), host.firstChild);
      banner.replaceChildren(
        el("span", "", `The run has ${newer.dumps} dump(s) now.`),
        el("button", "stw-follow-update", "Update"),
      );
      /** @type {HTMLElement} */ (banner.lastChild).addEventListener("click", () => {
        sessionStorage.setItem(KEPT, JSON.stringify({
          view_state: model.get("view_state"), view_range: model.get("view_range") }));
        location.reload();
      });
    } catch {
      // the server may be restarting: the next look tries again
    }
  };
  const timer = setInterval(look, intervalMs);
  return () => clearInterval(timer);
}
