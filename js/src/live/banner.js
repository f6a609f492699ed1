// The live view's banner: what the rollout is doing (samples, running,
// stalled, stragglers) and what was lost on the way, per sending process
// (records dropped at the sender, gaps in its sequence, a sender gone silent,
// the receiver's own downtime), so a picture with holes never looks whole.
// The senders are the rollout's own; a process of an earlier rollout that went
// silent without closing and sent this one nothing is named apart, as a notice
// that does not turn the border red (it lost none of this rollout's records).

import { el } from "../util/dom.js";
import { formatDuration } from "../util/format.js";

/**
 * One sender's health as the kernel or server reports it (docs/live-view.md).
 * @typedef {Object} SenderHealth
 * @property {string} sender "host:pid"
 * @property {number} [received] records received
 * @property {number} [lost] records missing from its sequence (seq gaps)
 * @property {number} [dropped] records it dropped itself (queue full, receiver down)
 * @property {boolean} [silent] no heartbeat for 10 s
 * @property {number} [quiet_s] seconds since it was last heard
 * @property {boolean} [closed] it said goodbye (close record)
 * @property {string} [clock] how far its clock is off the collector's, when that matters ("up to 2.0 min behind")
 */

/**
 * The loss lines, one per sender with something lost, silent or a clock off (empty:
 * nothing to say).
 * @param {SenderHealth[]} senders
 * @returns {string[]}
 */
export function lossLines(senders) {
  const lines = [];
  for (const sender of Array.isArray(senders) ? senders : []) {
    const parts = [];
    const dropped = Number(sender.dropped) || 0;
    const lost = Number(sender.lost) || 0;
    if (dropped > 0) parts.push(`${dropped} dropped at the sender`);
    if (lost > 0) parts.push(`${lost} missing in transit`);
    if (sender.silent && !sender.closed) parts.push(`silent for ${formatDuration(Number(sender.quiet_s) || 0)} (stopped or died?)`);
    if (typeof sender.clock === "string") parts.push(`clock ${sender.clock} the collector's (its samples' running times and stalls are off by that)`);
    if (parts.length) lines.push(`${sender.sender}: ${parts.join(", ")}`);
  }
  return lines;
}

/**
 * A silent process of an earlier rollout that sent nothing to this one.
 * @typedef {Object} AbsentSender
 * @property {string} sender "host:pid"
 * @property {number} [last_rollout] the rollout it was last heard in
 * @property {number} [quiet_s] seconds since it was last heard
 */

/**
 * The notice lines, one per absent sender.
 * @param {AbsentSender[]} absent
 * @returns {string[]}
 */
export function absentLines(absent) {
  return (Array.isArray(absent) ? absent : []).map((sender) =>
    `${sender.sender}: silent for ${formatDuration(Number(sender.quiet_s) || 0)} since rollout ${Number(sender.last_rollout)}, nothing sent to this one (stopped or died?)`);
}

/**
 * Records lost in all, over every sender.
 * @param {SenderHealth[]} senders
 */
export function totalLost(senders) {
  let total = 0;
  for (const sender of Array.isArray(senders) ? senders : []) total += (Number(sender.dropped) || 0) + (Number(sender.lost) || 0);
  return total;
}

/**
 * Fill the banner.
 * @param {HTMLElement} banner
 * @param {{nSamples: number, status: import("./status.js").LiveStatus|null, live: Record<string, any>, following: boolean}} info
 */
export function renderBanner(banner, info) {
  const { status, live } = info;
  const senders = /** @type {SenderHealth[]} */ (live.senders ?? []);
  const summary = [`${info.following ? "live" : "live (stopped)"}: ${info.nSamples} samples`];
  if (status) {
    summary.push(`${status.nRunning} running`);
    if (status.nStalled) summary.push(`${status.nStalled} stalled`);
    if (status.nStragglers) summary.push(`${status.nStragglers} stragglers (over p90 ${formatDuration(status.p90)})`);
  }
  const lines = lossLines(senders);
  if (typeof live.receiver_gap === "string" && live.receiver_gap) lines.push(live.receiver_gap);
  const lost = totalLost(senders);
  const children = [el("span", "stw-live-summary", summary.join(", "))];
  if (lines.length) {
    children.push(el("span", "stw-live-loss", lost ? `${lost} record(s) lost.` : "Check the senders:"));
    for (const line of lines) children.push(el("span", "stw-live-loss-line", line));
  }
  for (const line of absentLines(/** @type {AbsentSender[]} */ (live.absent ?? []))) {
    children.push(el("span", "stw-live-absent-line", line));
  }
  banner.replaceChildren(...children);
  banner.classList.toggle("stw-live-lossy", lines.length > 0);
  banner.dataset.lost = String(lost);
  banner.dataset.stalled = String(status?.nStalled ?? 0);
}
