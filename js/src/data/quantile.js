// The one quantile rule of the views (flame table, rollout diff): linear
// interpolation between closest ranks, pandas' default, so the widget's
// figures equal analysis.flame's and analysis.rollout_diff's.

/**
 * Quantile `fraction` (0..1) of ascending values: position fraction·(count−1), interpolated;
 * NaN when there are none.
 * @param {ArrayLike<number>} sorted
 * @param {number} fraction
 */
export function quantile(sorted, fraction) {
  const count = sorted.length;
  if (count === 0) return NaN;
  const pos = fraction * (count - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(count - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}
