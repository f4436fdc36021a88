const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/;

/**
 * Parses a human duration (`30s`, `500ms`, `2m`, `1.5h`, or a bare number of seconds) into milliseconds.
 *
 * Use it for every time-valued flag and environment variable of the CLI; returns `undefined` for text that is
 * not a duration, so the caller can say which flag was wrong. `0` is a valid duration (callers read it as "off").
 */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text.trim());
  if (!match) return undefined;
  const value = Number(match[1]);
  const unit = UNITS[match[2] ?? 's'] ?? 1000;
  const ms = value * unit;
  return Number.isFinite(ms) ? Math.round(ms) : undefined;
}

/**
 * Formats milliseconds for people: `850 ms`, `2.5 s`, `3 min 20 s`.
 *
 * Use it in messages and timelines.
 */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${Number((ms / 1000).toFixed(1))} s`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Math.round((ms % 60_000) / 1000);
  return seconds === 0 ? `${minutes} min` : `${minutes} min ${seconds} s`;
}
