// The `selected` trait (docs/payload.md) <-> a hit: what the renderer writes
// for a click, which item a value set from Python names, and the details panel
// of the selection. Payload indices are the renderer's own (the encoder sends
// spans and events in drawing order).

import { nameOf, sampleRowId, detailSpanForSegment } from "../data/decode.js";
import { renderDetails } from "../panels/panel.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../data/layout.js").Layout} Layout */
/** @typedef {import("../render/hit.js").Hit} Hit */
/** @typedef {import("./app.js").App} App */

/**
 * The `selected` value for a hit; a PD segment selects the PD-detail span it
 * stands for.
 * @param {Data} d
 * @param {Hit} h
 */
export function selectedValue(d, h) {
  if (h.type === "event") return { kind: "event", index: h.ev, sample_row: sampleRowId(d, h.sample), name: nameOf(d, d.evName[h.ev]) };
  if (h.type === "span" || h.type === "segment") {
    const i = h.type === "segment" ? detailSpanForSegment(d, h.seg) : h.span;
    return { kind: "span", index: i, sample_row: sampleRowId(d, h.sample), name: nameOf(d, d.spanName[i]) };
  }
  return {};
}

/**
 * Whether `sel` (from the kernel) names what `h` already selects: the kernel
 * echoes our own selection back completed (span_id, frame index).
 * @param {Data} d
 * @param {Hit|null} h
 * @param {any} sel
 */
export function selectsSame(d, h, sel) {
  if (!h) return false;
  const cur = /** @type {any} */ (selectedValue(d, h));
  return cur.kind === sel.kind && cur.index === Number(sel.index);
}

/**
 * The hit a `selected` value names, null when it names no item of this payload.
 * @param {Data} d
 * @param {Layout} L
 * @param {any} sel
 * @returns {Hit|null}
 */
export function hitOfSelected(d, L, sel) {
  if (sel.kind === "span") {
    const i = Number(sel.index);
    if (!(i >= 0 && i < d.nSpans)) return null;
    const s = d.spanSample[i];
    const row = L.rowOfSample[s] ?? -1;
    return { type: "span", row, sample: s, span: i, t: d.spanStart[i] };
  }
  if (sel.kind === "event") {
    const i = Number(sel.index);
    if (!(i >= 0 && i < d.nEvents)) return null;
    const s = d.evSample[i];
    const row = L.rowOfSample[s] ?? -1;
    return { type: "event", row, sample: s, ev: i, count: 1, members: [i], t: d.evTs[i] };
  }
  return null;
}

/**
 * Show the details panel for `h` (from the payload at once) and ask the kernel
 * (or the snapshot's tables) for its attributes; a reply for an older
 * selection is dropped.
 * @param {App} app
 * @param {Hit} h
 */
export function loadDetails(app, h) {
  const d = app.data;
  if (h.type !== "span" && h.type !== "segment" && h.type !== "event") return;
  const detailSpan = h.type === "segment" ? detailSpanForSegment(d, h.seg) : h.type === "span" ? h.span : -1;
  const kind = h.type === "event" ? "event" : "span";
  const index = h.type === "event" ? h.ev : detailSpan;
  const actions = {
    close: () => app.select(null),
    focus: () => app.focusSelection(),
    selectSpan: (/** @type {number} */ i) => {
      const s = d.spanSample[i];
      const row = app.layout.rowOfSample[s];
      if (row < 0) return;
      app.select({ type: "span", row, sample: s, span: i, t: d.spanStart[i] });
    },
    selectEvent: (/** @type {number} */ i) => {
      const s = d.evSample[i];
      const row = app.layout.rowOfSample[s];
      if (row < 0) return;
      app.select({ type: "event", row, sample: s, ev: i, count: 1, members: [i], t: d.evTs[i] });
    },
    sampleText: (/** @type {string} */ field) => app.requests.sampleText(h.sample, field).promise,
  };
  renderDetails(app.detailsEl, d, h, detailSpan, { status: "loading", detail: null }, actions);
  app.updateSide();
  const { req, promise } = app.requests.attrs(kind, index);
  app.pendingReq = req;
  promise.then(
    (reply) => {
      if (app.loop.disposed || reply.req !== app.pendingReq || app.selection !== h) return; // stale
      const ok = reply.detail && typeof reply.detail === "object";
      renderDetails(app.detailsEl, d, h, detailSpan, ok ? { status: "ok", detail: /** @type {Record<string, any>} */ (reply.detail) } : { status: "error", detail: null, error: reply.error || "no attributes" }, actions);
    },
    (err) => {
      if (app.loop.disposed || req !== app.pendingReq || app.selection !== h) return;
      renderDetails(app.detailsEl, d, h, detailSpan, { status: "error", detail: null, error: String(err && err.message ? err.message : err) }, actions);
    },
  );
}
