// The `selected` trait (docs/payload.md) <-> a hit: what the renderer writes
// for a click, which item a value set from Python names, and the details panel
// of the selection. Payload indices are the renderer's own (the encoder sends
// spans and events in drawing order).

import { nameOf, sampleRowId, detailSpanForSegment } from "../data/decode.js";
import { renderDetails } from "../panels/panel.js";
import { figureSpans } from "../data/engine.js";
import { renderEngineFigures } from "../panels/engine_figures.js";
import { el } from "../util/dom.js";
import { isItem } from "../render/hit.js";
import { sameEvent, sameSpan } from "../live/keep.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../data/layout.js").Layout} Layout */
/** @typedef {import("../render/hit.js").Hit} Hit */
/** @typedef {import("./app.js").App} App */

/**
 * The `selected` value for a hit; a PD segment selects the PD-detail span it
 * stands for.
 * @param {Data} data
 * @param {Hit} hit
 */
export function selectedValue(data, hit) {
  if (hit.type === "event") return { kind: "event", index: hit.ev, sample_row: sampleRowId(data, hit.sample), name: nameOf(data, data.evName[hit.ev]) };
  if (hit.type === "span" || hit.type === "segment") {
    const span = hit.type === "segment" ? detailSpanForSegment(data, hit.seg) : hit.span;
    return { kind: "span", index: span, sample_row: sampleRowId(data, hit.sample), name: nameOf(data, data.spanName[span]) };
  }
  return {};
}

/**
 * Whether `sel` (from the kernel) names what `hit` already selects: the kernel
 * echoes our own selection back completed (span_id, frame index).
 * @param {Data} data
 * @param {Hit|null} hit
 * @param {any} sel
 */
export function selectsSame(data, hit, sel) {
  if (!hit) return false;
  const cur = /** @type {any} */ (selectedValue(data, hit));
  return cur.kind === sel.kind && cur.index === Number(sel.index);
}

/**
 * The hit a `selected` value names, null when it names no item of this payload.
 * @param {Data} data
 * @param {Layout} layout
 * @param {any} sel
 * @returns {Hit|null}
 */
export function hitOfSelected(data, layout, sel) {
  if (sel.kind === "span") {
    const span = Number(sel.index);
    if (!(span >= 0 && span < data.nSpans)) return null;
    const sample = data.spanSample[span];
    const row = layout.rowOfSample[sample] ?? -1;
    return { type: "span", row, sample, span, t: data.spanStart[span] };
  }
  if (sel.kind === "event") {
    const ev = Number(sel.index);
    if (!(ev >= 0 && ev < data.nEvents)) return null;
    const sample = data.evSample[ev];
    const row = layout.rowOfSample[sample] ?? -1;
    return { type: "event", row, sample, ev, count: 1, members: [ev], t: data.evTs[ev] };
  }
  return null;
}

/**
 * Show the details panel for `hit` (from the payload at once) and ask the kernel
 * (or the snapshot's tables) for its attributes; a reply for an older
 * selection is dropped.
 * @param {App} app
 * @param {Hit} hit
 */
export function loadDetails(app, hit) {
  const data = app.shown.data;
  // The kernel refuses a request for another view than it shows (show() swapped it).
  const view = app.sync.get("payload")?.meta?.view_id;
  if (!isItem(hit)) return;
  const detailSpan = hit.type === "segment" ? detailSpanForSegment(data, hit.seg) : hit.type === "span" ? hit.span : -1;
  const kind = hit.type === "event" ? "event" : "span";
  const index = hit.type === "event" ? hit.ev : detailSpan;
  const actions = {
    close: () => app.select(null),
    focus: () => app.focusSelection(),
    // The panel's items are `data`'s; a live update may have shown a new payload
    // since (the selection kept), whose indices differ: each is found again there.
    selectSpan: (/** @type {number} */ span) => {
      const now = app.shown.data;
      const at = now === data ? span : sameSpan(data, now, span);
      if (at < 0) return;
      const sample = now.spanSample[at];
      const row = app.shown.layout.rowOfSample[sample];
      if (row < 0) return;
      app.select({ type: "span", row, sample, span: at, t: now.spanStart[at] });
    },
    selectEvent: (/** @type {number} */ ev) => {
      const now = app.shown.data;
      const at = now === data ? ev : sameEvent(data, now, ev);
      if (at < 0) return;
      const sample = now.evSample[at];
      const row = app.shown.layout.rowOfSample[sample];
      if (row < 0) return;
      app.select({ type: "event", row, sample, ev: at, count: 1, members: [at], t: now.evTs[at] });
    },
    sampleText: (/** @type {string} */ field) => app.requests.sampleText(hit.sample, field, view).promise,
  };
  const figures = hit.type === "span" ? figureSpans(data, hit.span) : null;
  const engineBox = figures ? el("div", "stw-sec stw-engine-figures-sec") : undefined;
  renderDetails(app.ui.detailsEl, data, hit, detailSpan, { status: "loading", detail: null, engineBox }, actions);
  app.updateSide();
  const { req, promise } = app.requests.attrs(kind, index, view);
  app.pointer.pendingReq = req;
  // A reply is for the panel while its request is the selection's: a new selection (or
  // none) makes another; a live update that keeps the selection keeps the request.
  promise.then(
    (reply) => {
      if (app.drawing.loop.disposed || reply.req !== app.pointer.pendingReq) return; // stale
      const ok = reply.detail && typeof reply.detail === "object";
      renderDetails(app.ui.detailsEl, data, hit, detailSpan, ok ? { status: "ok", detail: /** @type {Record<string, any>} */ (reply.detail), engineBox } : { status: "error", detail: null, error: reply.error || "no attributes", engineBox }, actions);
    },
    (err) => {
      if (app.drawing.loop.disposed || req !== app.pointer.pendingReq) return;
      renderDetails(app.ui.detailsEl, data, hit, detailSpan, { status: "error", detail: null, error: String(err && err.message ? err.message : err), engineBox }, actions);
    },
  );
  if (figures && engineBox) loadFigures(app, req, figures, engineBox, index === figures.generation ? promise : null, view);
}

/**
 * Fill the "Engine vs slime" section: the generation's attributes (the panel's own
 * request when the generation is the item shown) and each request span's.
 * @param {App} app
 * @param {number} req the details request of the selection they are for
 * @param {{generation: number, requests: number[]}} figures
 * @param {HTMLElement} box
 * @param {Promise<import("../data/model.js").AttrsReply>|null} generationReply
 * @param {string} [view] the payload's view id, as for loadDetails
 */
function loadFigures(app, req, figures, box, generationReply, view) {
  const data = app.shown.data;
  renderEngineFigures(box, data, figures.requests, { status: "loading" });
  const detailOf = (/** @type {Promise<import("../data/model.js").AttrsReply>} */ promise) => promise.then((reply) => (reply.detail && typeof reply.detail === "object" ? reply.detail : null));
  const slime = figures.generation < 0 ? Promise.resolve(null) : detailOf(generationReply ?? app.requests.attrs("span", figures.generation, view).promise);
  const requests = figures.requests.map((span) => detailOf(app.requests.attrs("span", span, view).promise));
  Promise.all([slime, ...requests]).then(
    ([generation, ...replies]) => {
      if (app.drawing.loop.disposed || app.pointer.pendingReq !== req) return; // another item shown since
      renderEngineFigures(box, data, figures.requests, { status: "ok", slime: generation, requests: replies });
    },
    (err) => {
      if (app.drawing.loop.disposed || app.pointer.pendingReq !== req) return;
      renderEngineFigures(box, data, figures.requests, { status: "error", error: String(err && err.message ? err.message : err) });
    },
  );
}
