// Time and number formatting for labels, tooltips, ticks and panels.

/**
 * Format a non-negative or negative duration in seconds for humans:
 * "850 µs", "12.3 ms", "4.35 s", "5m 46.8s", "1h 02m".
 * @param {number} sec
 * @returns {string}
 */
export function formatDuration(sec) {
  if (sec === null || sec === undefined || !Number.isFinite(sec)) return "—";
  if (sec < 0) return "-" + formatDuration(-sec);
  if (sec === 0) return "0 s";
  if (sec < 1e-3) {
    const us = sec * 1e6;
    // Rounding can carry "999.7 µs" to "1000 µs": hand over to milliseconds instead.
    if (us >= 999.5) return "1.00 ms";
    return (us < 10 ? trimZeros(us.toFixed(2)) : us < 100 ? trimZeros(us.toFixed(1)) : Math.round(us).toString()) + " µs";
  }
  if (sec < 1) {
    const ms = sec * 1e3;
    // Rounding can carry "999.7 ms" to "1000 ms": hand over to seconds instead.
    if (ms >= 999.5) return "1.00 s";
    return threeSig(ms) + " ms";
  }
  if (sec < 60) {
    if (sec >= 59.95) return "1m 0.0s";
    return threeSig(sec) + " s";
  }
  if (sec < 3600) {
    let minutes = Math.floor(sec / 60);
    let seconds = Math.round((sec - minutes * 60) * 10) / 10;
    if (seconds >= 60) {
      minutes += 1;
      seconds -= 60;
    }
    if (minutes >= 60) return "1h 00m";
    return `${minutes}m ${seconds.toFixed(1)}s`;
  }
  let hours = Math.floor(sec / 3600);
  let minutes = Math.round((sec - hours * 3600) / 60);
  if (minutes >= 60) {
    hours += 1;
    minutes -= 60;
  }
  return `${hours}h ${String(minutes).padStart(2, "0")}m`;
}

/**
 * A relative time (seconds since the dump start) in the same style.
 * @param {number} time
 */
export function formatTime(time) {
  return formatDuration(time);
}

/**
 * Milliseconds with a sensible precision, for PD breakdowns: "12.3 ms".
 * @param {number} sec
 */
export function formatMs(sec) {
  if (!Number.isFinite(sec)) return "—";
  const ms = sec * 1e3;
  if (Math.abs(ms) >= 100) return Math.round(ms).toLocaleString("en-US") + " ms";
  if (Math.abs(ms) >= 10) return ms.toFixed(1) + " ms";
  return ms.toFixed(2) + " ms";
}

/**
 * Three significant digits of a value under 1000, judged after rounding (9.996 is
 * "10.0", not "10.00").
 * @param {number} value
 */
function threeSig(value) {
  if (Math.round(value * 10) >= 1000) return Math.round(value).toString();
  if (Math.round(value * 100) >= 1000) return value.toFixed(1);
  return value.toFixed(2);
}

/** @param {string} text */
function trimZeros(text) {
  return text.includes(".") ? text.replace(/\.?0+$/, "") : text;
}

/**
 * Choose a "nice" tick step (1, 2, 5 × 10^k seconds, or minute/hour multiples)
 * so that ticks are at least `minPx` apart at `pxPerSec`.
 * @param {number} pxPerSec
 * @param {number} minPx
 * @returns {number}
 */
export function niceStep(pxPerSec, minPx) {
  const raw = minPx / Math.max(pxPerSec, 1e-12);
  if (raw >= 1) {
    for (const step of COARSE_STEPS) if (step >= raw) return step;
    return DAY * niceNumber(raw / DAY); // 1, 2, 5, 10, 20 ... days
  }
  return niceNumber(raw);
}

const DAY = 86400;

/**
 * The least of 1, 2, 5 × 10^k that is at least `raw`.
 * @param {number} raw
 */
function niceNumber(raw) {
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const multiple of [1, 2, 5]) if (multiple * power >= raw * (1 - 1e-9)) return multiple * power;
  return 10 * power;
}

const COARSE_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

/**
 * Label of a tick at time `time` when ticks are `step` apart. Sub-millisecond
 * steps are labelled as offsets from `base` ("+250 µs").
 * @param {number} time
 * @param {number} step
 * @param {number} [base]
 * @returns {string}
 */
export function formatTick(time, step, base = 0) {
  if (step < 1e-3) {
    const offset = time - base;
    const rounded = Math.round(offset / step) * step;
    if (Math.abs(rounded) < step / 2) return "+0";
    return "+" + formatDuration(rounded);
  }
  if (Math.abs(time) < step * 1e-6) return "0";
  const neg = time < 0;
  const magnitude = Math.abs(time);
  const sign = neg ? "-" : "";
  if (step >= 3600) {
    const hours = Math.floor(magnitude / 3600 + 1e-9);
    const minutes = Math.round((magnitude - hours * 3600) / 60);
    return `${sign}${hours}h ${String(minutes).padStart(2, "0")}m`;
  }
  if (step >= 60) {
    const hours = Math.floor(magnitude / 3600 + 1e-9);
    const minutes = Math.round((magnitude - hours * 3600) / 60);
    if (hours > 0) return `${sign}${hours}h ${String(minutes).padStart(2, "0")}m`;
    return `${sign}${minutes}m`;
  }
  if (step >= 1) {
    const total = Math.round(magnitude);
    const hours = Math.floor(total / 3600);
    const minutes = Math.floor((total - hours * 3600) / 60);
    const seconds = total - hours * 3600 - minutes * 60;
    if (hours > 0) return `${sign}${hours}h ${String(minutes).padStart(2, "0")}m ${String(seconds).padStart(2, "0")}s`;
    if (minutes > 0) return `${sign}${minutes}m ${String(seconds).padStart(2, "0")}s`;
    return `${sign}${seconds} s`;
  }
  const decimals = Math.max(0, Math.min(6, Math.ceil(-Math.log10(step) - 1e-9)));
  if (magnitude >= 60) {
    const minutes = Math.floor(magnitude / 60 + 1e-9);
    const seconds = magnitude - minutes * 60;
    return `${sign}${minutes}m ${Math.abs(seconds).toFixed(decimals)}s`;
  }
  return `${sign}${magnitude.toFixed(decimals)} s`;
}

/**
 * Absolute epoch seconds as a local date-time string with milliseconds.
 * @param {number} epoch
 */
export function formatEpoch(epoch) {
  if (!Number.isFinite(epoch)) return "—";
  const date = new Date(epoch * 1000);
  const p2 = (/** @type {number} */ value) => String(value).padStart(2, "0");
  const ms = String(date.getMilliseconds()).padStart(3, "0"); // of the second shown, before 1970 too
  return `${date.getFullYear()}-${p2(date.getMonth() + 1)}-${p2(date.getDate())} ${p2(date.getHours())}:${p2(date.getMinutes())}:${p2(date.getSeconds())}.${ms}`;
}

/**
 * Compact number: 1234 -> "1,234"; reward 0.12345 -> "0.123".
 * @param {number} value
 */
export function formatNumber(value) {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  if (value === 0) return "0"; // -0 too
  if (Number.isInteger(value)) return value.toLocaleString("en-US");
  const magnitude = Math.abs(value);
  if (magnitude >= 1000) return Math.round(value).toLocaleString("en-US");
  if (magnitude >= 1) return trimZeros(value.toFixed(3));
  if (magnitude >= 1e-3) return trimZeros(value.toFixed(4));
  return value.toExponential(2);
}

/**
 * Percent with one decimal.
 * @param {number} frac
 */
export function formatPct(frac) {
  if (!Number.isFinite(frac)) return "—";
  return (frac * 100).toFixed(1) + "%";
}
