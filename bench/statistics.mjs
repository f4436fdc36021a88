// Summaries of timing samples: median, min, max (ms unless said otherwise).

/** `{ median, p90, min, max, n }` of `samples` (p90 by nearest rank); an empty list gives `undefined`. */
export function summarize(samples) {
  if (samples.length === 0) return undefined;
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  const p90 = sorted[Math.min(sorted.length - 1, Math.ceil(0.9 * sorted.length) - 1)];
  return { median, p90, min: sorted[0], max: sorted[sorted.length - 1], n: sorted.length };
}
