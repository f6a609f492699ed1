// The views laid over the timeline, wired to the App: the filter box's query
// (its matches hide the rest), the rollout diff, the critical path and the
// flame view (a focus dims the rest), and the samples' fates (the ledger bars,
// rows coloured by fate). Each keeps its own state; the App asks
// them to update when the payload, the settings or the selection change.

import { QueryFilter, resolverFor } from "../data/query.js";
import { DiffView } from "../panels/diff_panel.js";
import { CriticalView } from "../panels/critical_panel.js";
import { FlameView } from "../panels/icicle.js";
import { FateView } from "../panels/fate_view.js";

export class Views {
  constructor() {
    /** @type {QueryFilter|null} */
    this.query = null;
    /** @type {DiffView|null} */
    this.diff = null;
    /** @type {CriticalView|null} */
    this.critical = null;
    /** @type {FlameView|null} */
    this.flameView = null;
    /** @type {FateView|null} the ledger bars and rows coloured by fate */
    this.fates = null;
  }

  /**
   * Build the views over `app` and run the saved query.
   * @param {import("./app.js").App} app
   * @param {HTMLElement} flameEl the flame view's container
   * @param {HTMLElement} ledgerEl the ledger bars' container
   */
  attach(app, flameEl, ledgerEl) {
    const query = new QueryFilter({
      data: () => app.shown.data,
      apply: (result) => {
        app.setMasks({ keep: result?.keep ?? null, evKeep: result?.evKeep ?? null, rowKeep: result?.rowKeep ?? null });
        app.updateControls();
      },
      status: (st) => {
        app.ui.root.dataset.query = st.state;
        app.controls.setQueryStatus(st);
      },
      resolve: resolverFor(app.requests, (data) => (data === app.shown.data ? app.sync.get("payload")?.meta?.view_id : undefined)),
    });
    const diff = new DiffView(app);
    const critical = new CriticalView(app);
    const flameView = new FlameView(app, flameEl);
    this.fates = new FateView(app, ledgerEl);
    // The views are the app's before the saved query runs: its masks rebuild the open flame view and critical path.
    this.query = query;
    this.diff = diff;
    this.critical = critical;
    this.flameView = flameView;
    query.run(app.viewState.settings.filter);
    diff.render();
  }
}
