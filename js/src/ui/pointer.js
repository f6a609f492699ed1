// What the user points at on the timeline: the cursor line and the counts at
// it, the brushed range and its summary, the selected item and the details
// request in flight for it, the hovered item and row.

/** @typedef {import("../render/hit.js").Hit} Hit */

export class PointerState {
  constructor() {
    /** NaN for none */
    this.cursor = NaN;
    /** @type {import("../panels/stats.js").CursorCounts|null} */
    this.counts = null;
    /** @type {[number, number]|null} */
    this.brush = null;
    /** @type {import("../panels/stats.js").BrushSummary|null} */
    this.brushSum = null;
    /** @type {Hit|null} */
    this.selection = null;
    /** the details request of the selection, -1 none */
    this.pendingReq = -1;
    /** @type {Hit|null} */
    this.hover = null;
    this.hoverRow = -1;
  }

  /** Forget the selection and its details request. */
  dropSelection() {
    this.selection = null;
    this.pendingReq = -1;
  }
}
