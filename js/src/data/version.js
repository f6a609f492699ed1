// What the renderer says of a payload made for another contract version
// (payload_contract.json's "version"): decode.js warns with it.

import CONTRACT from "../../../slime_trace_widget/view/payload_contract.json" with { type: "json" };

/**
 * What the renderer says of a payload of another contract version: older (a notebook
 * saved before an upgrade: re-run its cell) or newer (the package is ahead of this
 * page), or neither for a version that is not a number.
 * @param {unknown} version the payload's
 * @param {number} own this renderer's
 */
export function versionWarning(version, own) {
  const relation = typeof version !== "number" || !Number.isFinite(version) ? "not one this renderer knows"
    : version < own ? "older than this renderer's (re-run the cell that made it)" : "newer than this renderer's";
  return `slime-trace-widget: payload version ${String(version)} is ${relation} (${own})`;
}

/**
 * Warn on the console when a payload says it was made for another contract version.
 * @param {unknown} version the payload's (undefined: it does not say)
 */
export function warnOfOtherVersion(version) {
  if (version !== undefined && version !== CONTRACT.version) console.warn(versionWarning(version, CONTRACT.version));
}
