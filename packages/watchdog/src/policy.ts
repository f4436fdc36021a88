import { type Clock, InvalidOptionsError, isClock, systemClock } from '@kernelwarden/core';

/** The environment variable that sets the default cell budget, in seconds. */
export const CELL_TIMEOUT_ENV = 'KERNELWARDEN_CELL_TIMEOUT';

/** The cell budget used when neither the policy nor the environment sets one: 900 s. */
export const DEFAULT_CELL_TIMEOUT_MS = 900_000;

/**
 * How long a cell may run, and how long each rung of the escalation ladder waits.
 *
 * Pass it to `createWatchdog()`; every field is optional.
 */
export interface WatchdogPolicy {
  /**
   * The budget of one cell, in milliseconds, not counting time spent waiting for the user's stdin answer.
   * `0`, negative or infinite disables it (the caller's signal still runs the ladder).
   * @defaultValue `KERNELWARDEN_CELL_TIMEOUT` (seconds) when set, else 900 000 ms (900 s)
   */
  cellTimeoutMs?: number;
  /** How long to wait for the cell to finish after the interrupt before killing the kernel. @defaultValue 10 000 */
  interruptGraceMs?: number;
  /** How long to wait for the cell to settle after the kill before abandoning the lease. @defaultValue 10 000 */
  killGraceMs?: number;
  /**
   * How long the kill request itself may take, from when it is sent, once the cell has settled: a gateway kernel's
   * kill is a server-side restart that can take several seconds. A kill still running after it abandons the lease.
   * @defaultValue 60 000
   */
  killTimeoutMs?: number;
  /** The clock that measures the budget and the graces; inject testkit's `ManualClock` in tests. @defaultValue systemClock */
  clock?: Clock;
}

/** A validated policy with every default applied; `cellTimeoutMs` is `undefined` when the budget is disabled. */
export interface ResolvedWatchdogPolicy {
  /** The budget in milliseconds, or `undefined` when disabled. */
  readonly cellTimeoutMs: number | undefined;
  /** Milliseconds granted after the interrupt. */
  readonly interruptGraceMs: number;
  /** Milliseconds granted after the kill. */
  readonly killGraceMs: number;
  /** Milliseconds the kill request may take. */
  readonly killTimeoutMs: number;
  /** The clock in use. */
  readonly clock: Clock;
}

const KNOWN_FIELDS = new Set(['cellTimeoutMs', 'interruptGraceMs', 'killGraceMs', 'killTimeoutMs', 'clock']);

/**
 * Reads the cell budget from `KERNELWARDEN_CELL_TIMEOUT` (seconds): unset or blank gives the 900 s default; a value
 * that is not a positive finite number (`0`, `-5`, `inf`, `abc`) disables the budget.
 *
 * Use it to see which budget a watchdog created without `cellTimeoutMs` would apply.
 */
export function cellTimeoutFromEnv(env: Record<string, string | undefined> = process.env): number | undefined {
  const raw = env[CELL_TIMEOUT_ENV]?.trim();
  if (raw === undefined || raw === '') return DEFAULT_CELL_TIMEOUT_MS;
  const seconds = Number(raw);
  if (!Number.isFinite(seconds) || seconds <= 0) return undefined;
  return seconds * 1000;
}

/**
 * Validates a policy and applies its defaults; throws `InvalidOptionsError` naming the bad field
 * (`policy.killGraceMs`).
 *
 * `createWatchdog()` calls it; call it yourself to check a policy from configuration before use.
 */
export function resolveWatchdogPolicy(
  policy: WatchdogPolicy = {},
  env: Record<string, string | undefined> = process.env,
): ResolvedWatchdogPolicy {
  const issues: { path: string; message: string }[] = [];
  if (policy === null || typeof policy !== 'object') {
    throw new InvalidOptionsError([{ path: 'policy', message: 'must be an object' }], { subject: 'watchdog policy' });
  }
  for (const key of Object.keys(policy)) {
    if (!KNOWN_FIELDS.has(key)) issues.push({ path: `policy.${key}`, message: 'is not a watchdog policy field' });
  }
  const {
    cellTimeoutMs,
    interruptGraceMs = 10_000,
    killGraceMs = 10_000,
    killTimeoutMs = 60_000,
    clock = systemClock,
  } = policy;
  if (cellTimeoutMs !== undefined && (typeof cellTimeoutMs !== 'number' || Number.isNaN(cellTimeoutMs))) {
    issues.push({
      path: 'policy.cellTimeoutMs',
      message: 'must be a number of milliseconds (0, negative or Infinity disables the budget)',
    });
  }
  for (const [name, value] of [
    ['interruptGraceMs', interruptGraceMs],
    ['killGraceMs', killGraceMs],
    ['killTimeoutMs', killTimeoutMs],
  ] as const) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      issues.push({ path: `policy.${name}`, message: 'must be a finite number of milliseconds >= 0' });
    }
  }
  if (!isClock(clock)) {
    issues.push({ path: 'policy.clock', message: 'must be a Clock with now() and setTimer()' });
  }
  if (issues.length > 0) throw new InvalidOptionsError(issues, { subject: 'watchdog policy' });

  const budget =
    cellTimeoutMs === undefined
      ? cellTimeoutFromEnv(env)
      : Number.isFinite(cellTimeoutMs) && cellTimeoutMs > 0
        ? cellTimeoutMs
        : undefined;
  return Object.freeze({ cellTimeoutMs: budget, interruptGraceMs, killGraceMs, killTimeoutMs, clock });
}
