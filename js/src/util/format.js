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
    let m = Math.floor(sec / 60);
    let s = Math.round((sec - m * 60) * 10) / 10;
    if (s >= 60) {
      m += 1;
      s -= 60;
    }
    if (m >= 60) return "1h 00m";
    return `${m}m ${s.toFixed(1)}s`;
  }
  let h = Math.floor(sec / 3600);
  let m = Math.round((sec - h * 3600) / 60);
  if (m >= 60) {
    h += 1;
    m -= 60;
  }
  return `${h}h ${String(m).padStart(2, "0")}m`;
}

/**
 * A relative time (seconds since the dump start) in the same style.
 * @param {number} t
 */
export function formatTime(t) {
  return formatDuration(t);
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

/** @param {number} v */
function threeSig(v) {
  if (v >= 100) return Math.round(v).toString();
  if (v >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

/** @param {string} s */
function trimZeros(s) {
  return s.includes(".") ? s.replace(/\.?0+$/, "") : s;
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
    for (const c of COARSE_STEPS) if (c >= raw) return c;
    return Math.ceil(raw / 86400) * 86400;
  }
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5]) if (m * p >= raw * (1 - 1e-9)) return m * p;
  return 10 * p;
}

const COARSE_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

/**
 * Label of a tick at time `t` when ticks are `step` apart. Sub-millisecond
 * steps are labelled as offsets from `base` ("+250 µs").
 * @param {number} t
 * @param {number} step
 * @param {number} [base]
 * @returns {string}
 */
export function formatTick(t, step, base = 0) {
  if (step < 1e-3) {
    const d = t - base;
    const v = Math.round(d / step) * step;
    if (Math.abs(v) < step / 2) return "+0";
    return "+" + formatDuration(v);
  }
  if (Math.abs(t) < step * 1e-6) return "0";
  const neg = t < 0;
  const a = Math.abs(t);
  const sign = neg ? "-" : "";
  if (step >= 3600) {
    const h = Math.floor(a / 3600 + 1e-9);
    const m = Math.round((a - h * 3600) / 60);
    return `${sign}${h}h ${String(m).padStart(2, "0")}m`;
  }
  if (step >= 60) {
    const h = Math.floor(a / 3600 + 1e-9);
    const m = Math.round((a - h * 3600) / 60);
    if (h > 0) return `${sign}${h}h ${String(m).padStart(2, "0")}m`;
    return `${sign}${m}m`;
  }
  if (step >= 1) {
    const total = Math.round(a);
    const h = Math.floor(total / 3600);
    const m = Math.floor((total - h * 3600) / 60);
    const s = total - h * 3600 - m * 60;
    if (h > 0) return `${sign}${h}h ${String(m).padStart(2, "0")}m ${String(s).padStart(2, "0")}s`;
    if (m > 0) return `${sign}${m}m ${String(s).padStart(2, "0")}s`;
    return `${sign}${s} s`;
  }
  const decimals = Math.max(0, Math.min(6, Math.ceil(-Math.log10(step) - 1e-9)));
  if (a >= 60) {
    const m = Math.floor(a / 60 + 1e-9);
    const s = a - m * 60;
    return `${sign}${m}m ${Math.abs(s).toFixed(decimals)}s`;
  }
  return `${sign}${a.toFixed(decimals)} s`;
}

/**
 * Absolute epoch seconds as a local date-time string with milliseconds.
 * @param {number} epoch
 */
export function formatEpoch(epoch) {
  if (!Number.isFinite(epoch)) return "—";
  const d = new Date(epoch * 1000);
  const p2 = (/** @type {number} */ n) => String(n).padStart(2, "0");
  const ms = String(Math.floor((epoch * 1000) % 1000)).padStart(3, "0");
  return `${d.getFullYear()}-${p2(d.getMonth() + 1)}-${p2(d.getDate())} ${p2(d.getHours())}:${p2(d.getMinutes())}:${p2(d.getSeconds())}.${ms}`;
}

/**
 * Compact number: 1234 -> "1,234"; reward 0.12345 -> "0.123".
 * @param {number} v
 */
export function formatNumber(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "—";
  if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  const a = Math.abs(v);
  if (a >= 1000) return Math.round(v).toLocaleString("en-US");
  if (a >= 1) return trimZeros(v.toFixed(3));
  if (a >= 1e-3) return trimZeros(v.toFixed(4));
  return v.toExponential(2);
}

/**
 * Percent with one decimal.
 * @param {number} frac
 */
export function formatPct(frac) {
  if (!Number.isFinite(frac)) return "—";
  return (frac * 100).toFixed(1) + "%";
}
