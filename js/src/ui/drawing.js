// What draws a view and what it keeps between frames: the frame loop, the
// width sizer, the theme and its colours, the timeline's painter, the
// overview, the label gutter's width (measured once per payload and theme),
// the viewport's height and the link arrows as last painted. `paintFrame`
// draws one frame of an App from its parts; the passes themselves are
// render/draw.js's.

import { Painter } from "../render/draw.js";
import { paintEmpty } from "../render/margins.js";
import { ColorTable } from "../render/colors.js";
import { FrameLoop } from "../render/frameloop.js";
import { Sizer, OVERVIEW_H, MAX_VIEWPORT_H } from "../render/sizing.js";
import { labelWidthOf } from "../render/viewport.js";
import { arrowsFor, paintArrows } from "../render/arrows.js";
import { Overview } from "../panels/overview.js";
import { hostTheme } from "./theme.js";
import { updateFooter } from "./shell.js";

/** @typedef {import("./shell.js").Shell} Shell */
/** @typedef {import("../data/decode.js").Data} Data */
/** @typedef {import("../render/hit.js").Geo} Geo */

export class Drawing {
  /**
   * @param {Shell} ui
   * @param {Data} data
   * @param {number} t0 performance.now() when render() was called
   * @param {() => void} frame paints a frame
   * @param {import("../panels/overview.js").OverviewHost} overviewHost
   */
  constructor(ui, data, t0, frame, overviewHost) {
    this.loop = new FrameLoop(frame, t0);
    this.sizer = new Sizer(() => ui.scrollEl.clientWidth || ui.mainEl.clientWidth, () => this.loop.request());
    this.theme = hostTheme(ui.root);
    this.colors = new ColorTable(data.names, this.theme);
    this.painter = new Painter(ui.canvas);
    this.overview = new Overview(ui.ovCanvas, overviewHost);
    /** the label gutter's width, -1 until measured */
    this.labelW = -1;
    this.viewportH = MAX_VIEWPORT_H;
    /** @type {import("../render/arrows.js").Arrow[]} the selection's link arrows as last painted */
    this.arrows = [];
  }

  /**
   * Width the row labels need (longest labels measured), cached until `newData` or `retheme`.
   * @param {Data} data
   */
  labelWidth(data) {
    const font = `12px ${this.theme.font}`;
    if (this.labelW < 0) this.labelW = labelWidthOf(data, (label) => this.painter.textWidth(font, label));
    return this.labelW;
  }

  /**
   * New data: colours and the label width follow it.
   * @param {Data} data
   */
  newData(data) {
    this.labelW = -1;
    this.colors = new ColorTable(data.names, this.theme);
  }

  /**
   * The host's theme changed.
   * @param {HTMLElement} root
   * @param {Data} data
   */
  retheme(root, data) {
    this.theme = hostTheme(root);
    this.colors = new ColorTable(data.names, this.theme);
    this.painter.resetTextCache();
    this.labelW = -1;
  }

  /**
   * Size both canvases for a frame of `geometry`.
   * @param {Geo} geometry
   * @param {number} dpr
   */
  resize(geometry, dpr) {
    const { painter, overview } = this;
    if (painter.w !== geometry.width || painter.h !== geometry.height || painter.dpr !== dpr) painter.resize(geometry.width, geometry.height, dpr);
    if (overview.w !== geometry.width || overview.dpr !== dpr) overview.resize(geometry.width, OVERVIEW_H, dpr);
  }
}

/**
 * Paint one frame of `app`: the timeline's passes, the empty note, the link
 * arrows, the overview; then the side panel's height, the frame time, the
 * test hooks' counters and the footer.
 * @param {import("./app.js").App} app
 */
export function paintFrame(app) {
  const { ui, drawing, shown, pointer } = app;
  const startTime = performance.now();
  const width = ui.root.clientWidth;
  ui.root.classList.toggle("stw-narrow", width > 0 && width < 980);
  const frameWidth = drawing.sizer.frameWidth();
  if (!frameWidth) return; // no width (hidden, or the host mid theme swap): the sizer asks for another frame
  if (app.viewState.pendingScroll !== undefined) {
    ui.scrollEl.scrollTop = app.viewState.pendingScroll;
    app.viewState.pendingScroll = undefined;
  }
  const geometry = app.geometry(frameWidth);
  const dpr = Math.max(1, window.devicePixelRatio || 1);
  drawing.resize(geometry, dpr);
  const drawn = drawing.painter.paint(sceneOf(app, geometry));
  if (shown.rows.length === 0) paintEmpty(drawing.painter, drawing.theme, shown.data, geometry);
  drawing.arrows = arrowsFor(shown.data, shown.layout, geometry, shown.vis, shown.evVis, pointer.selection);
  paintArrows(drawing.painter.ctx, dpr, geometry, drawing.theme, drawing.arrows);
  app.live?.paint(geometry);
  drawing.overview.paint(drawing.theme, pointer.cursor);
  const dt = performance.now() - startTime;
  if (!ui.sideEl.hidden) {
    const mh = ui.root.classList.contains("stw-narrow") ? "" : `${ui.mainEl.offsetHeight}px`;
    if (ui.sideEl.style.maxHeight !== mh) ui.sideEl.style.maxHeight = mh;
  }
  drawing.loop.record(dt);
  ui.root.dataset.rows = String(shown.rows.length);
  ui.root.dataset.drawnRows = String(drawn);
  updateFooter(ui.footerView, shown.data, app.viewState.timeWindow);
  drawing.loop.painted(ui.root);
}

/**
 * What the timeline's passes read (render/draw.js's Scene).
 * @param {import("./app.js").App} app
 * @param {Geo} geometry
 * @returns {import("../render/draw.js").Scene}
 */
function sceneOf(app, geometry) {
  const { shown, pointer, drawing, viewState } = app;
  const selection = pointer.selection;
  const selRow = selection && "row" in selection ? shown.layout.rowOfSample[selection.sample] ?? -1 : -1;
  return {
    d: shown.data,
    L: shown.layout,
    g: geometry,
    vis: shown.vis,
    evVis: shown.evVis,
    theme: drawing.theme,
    colors: drawing.colors,
    cursor: pointer.cursor,
    brush: pointer.brush,
    selection,
    hover: pointer.hover,
    hoverRow: pointer.hoverRow,
    selRow,
    raiseShown: viewState.highlight >= 0 || shown.masks.focus !== null,
    loadSplit: viewState.settings.loadSplit,
    fates: app.views.fates?.frame(geometry) ?? null,
  };
}
