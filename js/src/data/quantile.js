// The one quantile rule of the views (flame table, rollout diff): linear
// interpolation between closest ranks, pandas' default, so the widget's
// figures equal analysis.flame's and analysis.rollout_diff's.

/**
 * Quantile `q` (0..1) of ascending values: position q·(n−1), interpolated;
 * NaN when there are none.
 * @param {ArrayLike<number>} sorted
 * @param {number} q
 */
export function quantile(sorted, q) {
  const n = sorted.length;
  if (n === 0) return NaN;
  const pos = q * (n - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(n - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}
