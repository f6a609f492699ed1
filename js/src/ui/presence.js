// How a drawn view tells the kernel it is there (docs/payload.md, "Views"):
// `view_opened` when drawn, `view_alive` every `view_alive_seconds` (the widget's
// trait; the contract's default where the model has none, as a snapshot page's),
// `view_closed` when removed. A reloaded or closed page sends no `view_closed`;
// its views just stop saying `view_alive`, and the kernel counts them as gone.

import CONTRACT from "../../../slime_trace_widget/view/payload_contract.json" with { type: "json" };

/** @typedef {import("../data/model.js").AnyModel} AnyModel */

/**
 * The clock the announcements run on (the browser's timers, or a test's).
 * @typedef {Object} Timers
 * @property {(callback: () => void, ms: number) => unknown} every
 * @property {(handle: unknown) => void} stop
 */

/** @type {Timers} */
const BROWSER_TIMERS = {
  every: (callback, ms) => setInterval(callback, ms),
  stop: (handle) => clearInterval(/** @type {ReturnType<typeof setInterval>} */ (handle)),
};

/** An id for one view of a widget, unique among its views. */
export function newViewId() {
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

/**
 * Seconds between two `view_alive` messages: the model's `view_alive_seconds`
 * when it holds a positive number, else the contract's default.
 * @param {AnyModel} model
 */
export function aliveSeconds(model) {
  const seconds = Number(model.get("view_alive_seconds"));
  return Number.isFinite(seconds) && seconds > 0 ? seconds : CONTRACT.views.alive_every_seconds;
}

/**
 * Say `view_opened` for `view` now and `view_alive` at the model's interval (which
 * follows changes of `view_alive_seconds`) until the returned function is called,
 * which says `view_closed`.
 * @param {AnyModel} model
 * @param {string} view
 * @param {Timers} [timers]
 * @returns {() => void}
 */
export function announceView(model, view, timers = BROWSER_TIMERS) {
  tell(model, "view_opened", view);
  let handle = timers.every(() => tell(model, "view_alive", view), aliveSeconds(model) * 1000);
  const onInterval = () => {
    timers.stop(handle);
    handle = timers.every(() => tell(model, "view_alive", view), aliveSeconds(model) * 1000);
  };
  model.on("change:view_alive_seconds", onInterval);
  return () => {
    timers.stop(handle);
    model.off("change:view_alive_seconds", onInterval);
    tell(model, "view_closed", view);
  };
}

/**
 * Send one view message. A model whose comm is gone (the widget closed) cannot be
 * told, and needs not be.
 * @param {AnyModel} model
 * @param {"view_opened"|"view_alive"|"view_closed"} type
 * @param {string} view
 */
function tell(model, type, view) {
  try {
    model.send({ type, view });
  } catch (err) {
    console.debug("slime-trace-widget: could not send", type, err);
  }
}
