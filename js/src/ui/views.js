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

/**
 * Build the views over `app` and run the saved query.
 * @param {import("./app.js").App} app
 * @param {HTMLElement} flameEl the flame view's container
 * @param {HTMLElement} ledgerEl the ledger bars' container
 */
export function attachViews(app, flameEl, ledgerEl) {
  const query = new QueryFilter({
    data: () => app.data,
    apply: (result) => {
      app.setMasks({ keep: result?.keep ?? null, evKeep: result?.evKeep ?? null, rowKeep: result?.rowKeep ?? null });
      app.updateControls();
    },
    status: (st) => {
      app.root.dataset.query = st.state;
      app.controls.setQueryStatus(st);
    },
    resolve: resolverFor(app.requests, (data) => (data === app.data ? app.sync.get("payload")?.meta?.view_id : undefined)),
  });
  const diff = new DiffView(app);
  const critical = new CriticalView(app);
  const flameView = new FlameView(app, flameEl);
  app.fates = new FateView(app, ledgerEl);
  // The views are the app's before the saved query runs: its masks rebuild the open flame view and critical path.
  app.query = query;
  app.diff = diff;
  app.critical = critical;
  app.flameView = flameView;
  query.run(app.settings.filter);
  diff.render();
  return { query, diff, critical, flameView };
}
