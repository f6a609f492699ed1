// The trace a view shows: the payload decoded, the views' masks over it, what
// of it is drawn (visibility), the rows (filtered and sorted), their layout,
// the overview's histogram and the legend. Each derived part is rebuilt by the
// one method named for it; a change of data (a new payload, or samples and
// spans added to it) calls them in order: visibility, rows, layout.

import { decodePayload, sampleRowId } from "../data/decode.js";
import { allSamples, sortRows, buildLayout } from "../data/layout.js";
import { spanVisibility, eventVisibility } from "../data/filters.js";
import { noteMasks } from "../data/links.js";
import { activeHistogram } from "../panels/overview.js";
import { cursorCounts } from "../panels/stats.js";
import { legendInfo } from "../panels/legend.js";

/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../data/filters.js").ViewMasks} ViewMasks */
/** @typedef {import("./controls.js").Settings} Settings */

/** Bins of the overview's activity histogram. */
const HISTOGRAM_BINS = 400;

/** @returns {ViewMasks} no view hides or dims anything */
function noMasks() {
  return { keep: null, evKeep: null, rowKeep: null, focus: null, evFocus: null };
}

export class ShownTrace {
  /**
   * @param {any} payload the `payload` trait
   * @param {number} laneH
   */
  constructor(payload, laneH) {
    /** @type {Data} */
    this.data = decodePayload(payload);
    this.legend = legendInfo(this.data);
    /** @type {ViewMasks} the views' masks over payload items (App.setMasks) */
    this.masks = noMasks();
    /** @type {Uint8Array} per span: 0 hidden, 1 drawn, 2 dimmed */
    this.vis = new Uint8Array(0);
    /** @type {Uint8Array} per event, as `vis` */
    this.evVis = new Uint8Array(0);
    /** @type {Uint32Array} payload samples in row order */
    this.rows = new Uint32Array(0);
    /** @type {Float32Array} */
    this.hist = new Float32Array(0);
    this.layout = buildLayout(this.data, this.rows, () => false, laneH);
  }

  /**
   * Show a new payload: its masks start empty (the views that set them recompute theirs).
   * @param {any} payload
   */
  replace(payload) {
    this.data = decodePayload(payload);
    this.legend = legendInfo(this.data);
    this.masks = noMasks();
  }

  /**
   * Replace some of the masks; returns whether the rows' mask changed (the rows need refiltering).
   * @param {Partial<ViewMasks>} patch
   */
  patchMasks(patch) {
    const rowsChanged = "rowKeep" in patch && patch.rowKeep !== this.masks.rowKeep;
    Object.assign(this.masks, patch);
    noteMasks(this.data, this.masks);
    return rowsChanged;
  }

  /**
   * Which spans and events are drawn, dimmed or hidden.
   * @param {Settings} settings
   * @param {number} highlight highlighted name, -1 none
   */
  updateVisibility(settings, highlight) {
    const masks = this.masks;
    const options = { showOpen: settings.showOpen, showEvents: settings.showEvents, showUnmatched: settings.showUnmatched, attempt: settings.attempt, attemptMode: settings.attemptMode, highlightName: highlight, keep: masks.keep, evKeep: masks.evKeep, focus: masks.focus, evFocus: masks.evFocus };
    this.vis = spanVisibility(this.data, options);
    this.evVis = eventVisibility(this.data, options);
  }

  /**
   * The rows (the rows' mask, then the sort) and the histogram of their activity.
   * @param {Settings} settings
   */
  updateRows(settings) {
    const data = this.data;
    const keepRow = this.masks.rowKeep;
    const matched = allSamples(data);
    this.rows = sortRows(data, keepRow ? matched.filter((sample) => keepRow[sample]) : matched, settings.sort, settings.desc);
    this.hist = activeHistogram(data, this.rows, data.globalStart, data.globalEnd, HISTOGRAM_BINS);
  }

  /**
   * @param {number} laneH
   * @param {(rowId: number) => boolean} isExpanded by sample row id
   */
  updateLayout(laneH, isExpanded) {
    this.layout = buildLayout(this.data, this.rows, (sample) => isExpanded(sampleRowId(this.data, sample)), laneH);
  }

  /**
   * Samples not started, running and ended at `time`, among the rows.
   * @param {number} time
   */
  countsAt(time) {
    return cursorCounts(this.data, this.rows, this.vis, time);
  }
}
