// The model traits a view follows after it starts: a new `payload` re-renders
// in place, `view_range` and `selected` set from Python move the view and the
// selection (our own writes are not echoed back), `height` resizes the rows.

import { validRange } from "./viewstate.js";

/** @typedef {import("./app.js").App} App */

/**
 * Subscribe `app` to its model's trait changes.
 * @param {App} app
 * @returns {() => void} unsubscribe
 */
export function followTraits(app) {
  const model = app.model;
  const onPayload = () => app.replacePayload();
  const onViewRange = () => {
    if (app.sync.writing) return;
    const range = app.sync.get("view_range");
    if (!validRange(range)) return;
    if (Math.abs(range[0] - app.viewState.timeWindow.t0) < 1e-9 && Math.abs(range[1] - app.viewState.timeWindow.t1) < 1e-9) return;
    app.setView(range[0], range[1]);
  };
  const onSelected = () => {
    if (app.sync.writing) return;
    const sel = app.sync.get("selected");
    if (sel && typeof sel === "object") app.applySelectedFromModel(sel);
  };
  const onHeight = () => {
    app.sizeViewport();
    app.requestFrame();
  };
  model.on("change:payload", onPayload);
  model.on("change:view_range", onViewRange);
  model.on("change:selected", onSelected);
  model.on("change:height", onHeight);
  return () => {
    model.off("change:payload", onPayload);
    model.off("change:view_range", onViewRange);
    model.off("change:selected", onSelected);
    model.off("change:height", onHeight);
  };
}
