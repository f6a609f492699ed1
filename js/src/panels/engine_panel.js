// The details panel's "Engine phases" table: seconds and share of each phase
// of a generation's time inside the engine (data/engine.js computes them).

import { enginePhaseColor } from "../render/colors.js";
import { shareRow, shareTable } from "./shares.js";

/** @typedef {import("../data/engine.js").EnginePhase} EnginePhase */

/**
 * @param {HTMLElement} host
 * @param {EnginePhase[]} phases
 */
export function renderEnginePhases(host, phases) {
  const total = phases.reduce((sum, row) => sum + row.dur, 0) || 1;
  const { table, body } = shareTable("stw-table stw-engine-phases", "phase");
  for (const row of phases) body.appendChild(shareRow(row.phase, row.dur, total, enginePhaseColor(row.phase)));
  host.appendChild(table);
}
