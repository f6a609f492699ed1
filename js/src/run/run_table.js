// The run overview (slime_trace_widget/view/run_view.py): one row per dump of a
// run dataset with its trend figures as bars scaled to the column's largest
// value; clicking a row asks Python to open that rollout's timeline.

import "./run_table.css";
import { el } from "../util/dom.js";
import { cellText, columnMaxima } from "./run_figures.js";

/** @typedef {import("./run_figures.js").RunRow} RunRow */
/** @typedef {import("./run_figures.js").RunColumn} RunColumn */

/**
 * @param {{ model: import("../data/model.js").AnyModel, el: HTMLElement }} ctx
 * @returns {() => void}
 */
function render({ model, el: host }) {
  const root = el("div", "stw-run");
  host.appendChild(root);
  const draw = () => {
    /** @type {RunRow[]} */
    const rows = model.get("rows") ?? [];
    /** @type {RunColumn[]} */
    const columns = model.get("columns") ?? [];
    const chosen = model.get("chosen") ?? {};
    const top = columnMaxima(rows, columns);
    const table = el("table", "stw-run-table");
    const head = table.appendChild(el("tr"));
    for (const column of columns) head.appendChild(el("th", "", column.label));
    rows.forEach((row, index) => {
      const line = table.appendChild(el("tr", "stw-run-row"));
      line.dataset.index = String(index);
      if (row.dump_file === chosen.dump_file && row.rollout_id === chosen.rollout_id
        && row.dump_kind === chosen.dump_kind) {
        line.classList.add("stw-run-chosen");
      }
      for (const column of columns) {
        const cell = line.appendChild(el("td", column.kind === "text" ? "" : "stw-run-num"));
        const value = row[column.key];
        if (column.kind !== "text" && typeof value === "number" && top[column.key] > 0) {
          const bar = cell.appendChild(el("div", "stw-run-bar"));
          bar.style.width = `${Math.max(0, Math.min(1, value / top[column.key])) * 100}%`;
        }
        cell.appendChild(el("span", "", cellText(value, column.kind)));
      }
      line.addEventListener("click", () => {
        model.set("chosen", { rollout_id: row.rollout_id, dump_kind: row.dump_kind, dump_file: row.dump_file, n: Date.now() });
        model.save_changes();
      });
    });
    root.replaceChildren(el("div", "stw-run-title", model.get("title") ?? "run"), table);
  };
  draw();
  model.on("change:rows", draw);
  model.on("change:chosen", draw);
  return () => {
    model.off("change:rows", draw);
    model.off("change:chosen", draw);
    root.remove();
  };
}

export default { render };
