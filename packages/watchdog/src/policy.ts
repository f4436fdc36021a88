import { type Clock, isClock, parseOptions, systemClock } from '@kernelwarden/core';
import { z } from 'zod/v3';

/** The environment variable that sets the default cell budget, in seconds. */
export const CELL_TIMEOUT_ENV = 'KERNELWARDEN_CELL_TIMEOUT';

/** The cell budget used when neither the policy nor the environment sets one: 900 s. */
export const DEFAULT_CELL_TIMEOUT_MS = 900_000;
/** How long the ladder waits for the cell after its interrupt, unless `interruptGraceMs` says otherwise. */
export const DEFAULT_INTERRUPT_GRACE_MS = 10_000;
/** How long the ladder waits for the cell to settle after the kill, unless `killGraceMs` says otherwise. */
export const DEFAULT_KILL_GRACE_MS = 10_000;
/** How long the kill request itself may take once the cell settled, unless `killTimeoutMs` says otherwise. */
export const DEFAULT_KILL_TIMEOUT_MS = 60_000;

/**
 * How long a cell may run, and how long each rung of the escalation ladder waits.
 *
 * Pass it to `createWatchdog()`; every field is optional.
 */
export interface WatchdogPolicy {
  /**
   * The budget of one cell, in milliseconds, not counting time spent waiting for the user's stdin answer.
   * `0`, negative or infinite disables it (the caller's signal still runs the ladder).
   * @defaultValue `KERNELWARDEN_CELL_TIMEOUT` (seconds) when set, else {@link DEFAULT_CELL_TIMEOUT_MS}
   */
  cellTimeoutMs?: number;
  /**
   * How long to wait for the cell to finish after the interrupt before killing the kernel.
   * @defaultValue {@link DEFAULT_INTERRUPT_GRACE_MS}
   */
  interruptGraceMs?: number;
  /**
   * How long to wait for the cell to settle after the kill before abandoning the lease.
   * @defaultValue {@link DEFAULT_KILL_GRACE_MS}
   */
  killGraceMs?: number;
  /**
   * How long the kill request itself may take, from when it is sent, once the cell has settled: a gateway kernel's
   * kill is a server-side restart that can take several seconds. A kill still running after it abandons the lease.
   * @defaultValue {@link DEFAULT_KILL_TIMEOUT_MS}
   */
  killTimeoutMs?: number;
  /** The clock that measures the budget and the graces; inject testkit's `ManualClock` in tests. @defaultValue `systemClock` */
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

const graceMs = z
  .number({ message: 'must be a finite number of milliseconds >= 0' })
  .finite('must be a finite number of milliseconds >= 0')
  .min(0, 'must be a finite number of milliseconds >= 0');

const policySchema = z
  .object(
    {
      cellTimeoutMs: z
        .custom<number>(
          (value) => typeof value === 'number' && !Number.isNaN(value),
          'must be a number of milliseconds (0, negative or Infinity disables the budget)',
        )
        .optional(),
      interruptGraceMs: graceMs.optional(),
      killGraceMs: graceMs.optional(),
      killTimeoutMs: graceMs.optional(),
      clock: z.custom<Clock>(isClock, 'must be a Clock with now() and setTimer()').optional(),
    },
    { message: 'must be an object' },
  )
  .strict();

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
  const {
    cellTimeoutMs,
    interruptGraceMs = DEFAULT_INTERRUPT_GRACE_MS,
    killGraceMs = DEFAULT_KILL_GRACE_MS,
    killTimeoutMs = DEFAULT_KILL_TIMEOUT_MS,
    clock = systemClock,
  } = parseOptions(policySchema, policy, { subject: 'watchdog policy', root: 'policy' });
  const budget =
    cellTimeoutMs === undefined
      ? cellTimeoutFromEnv(env)
      : Number.isFinite(cellTimeoutMs) && cellTimeoutMs > 0
        ? cellTimeoutMs
        : undefined;
  return Object.freeze({ cellTimeoutMs: budget, interruptGraceMs, killGraceMs, killTimeoutMs, clock });
}
