import { type Clock, effectiveTimeout, isClock, parseOptions, systemClock } from '@kernelwarden/core';
import { z } from 'zod/v3';

/** A slot's idle expiry when none is given: `0`, off. */
export const DEFAULT_IDLE_TTL_MS = 0;
/** The bound on each kernel shutdown when none is given: `0`, the kernel's own default. */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 0;

/** Options of `new KernelSupervisor()`. */
export interface KernelSupervisorOptions {
  /**
   * A slot whose kernel was not used (ensured, held or published) for this long is shut down and reports
   * `state: 'ended', endedReason: 'idle_ttl'`. A slot under `hold()` never expires. `0`, negative or infinite
   * disables it.
   * @defaultValue {@link DEFAULT_IDLE_TTL_MS} (off)
   */
  idleTtlMs?: number;
  /** The clock for the idle timers and shutdown retries. @defaultValue `systemClock` */
  clock?: Clock;
  /**
   * Passed to every `kernel.shutdown({ timeoutMs })` the supervisor makes; `0` leaves it to the kernel.
   * @defaultValue {@link DEFAULT_SHUTDOWN_TIMEOUT_MS} (the kernel's default)
   */
  shutdownTimeoutMs?: number;
}

/** `KernelSupervisorOptions` validated, with every default applied; a disabled timeout is `undefined`. */
export interface ResolvedSupervisorOptions {
  /** Milliseconds of idleness before a slot expires, or `undefined` when expiry is off. */
  readonly idleTtlMs: number | undefined;
  readonly clock: Clock;
  /** The `timeoutMs` handed to every kernel shutdown, or `undefined` for the kernel's default. */
  readonly shutdownTimeoutMs: number | undefined;
}

/** Milliseconds where `0`, negative and infinite values turn the timeout off: any number but NaN. */
export const timeoutSchema = z.custom<number>(
  (value) => typeof value === 'number' && !Number.isNaN(value),
  'expected a number of milliseconds (0, negative or Infinity turns it off)',
);

/** An injected clock: `isClock` from core. */
export const clockSchema = z.custom<Clock>(isClock, 'expected a Clock with now() and setTimer()');

const supervisorOptionsSchema = z.object({
  idleTtlMs: timeoutSchema.optional(),
  clock: clockSchema.optional(),
  shutdownTimeoutMs: timeoutSchema.optional(),
});

/**
 * Validates `KernelSupervisor` options and applies their defaults; throws `InvalidOptionsError` naming the bad field
 * (`options.idleTtlMs`).
 *
 * `new KernelSupervisor()` calls it; call it yourself to check configuration before use.
 */
export function resolveSupervisorOptions(options: KernelSupervisorOptions = {}): ResolvedSupervisorOptions {
  const o = parseOptions(supervisorOptionsSchema, options, { subject: 'supervisor options', root: 'options' });
  return Object.freeze({
    idleTtlMs: effectiveTimeout(o.idleTtlMs ?? DEFAULT_IDLE_TTL_MS),
    clock: o.clock ?? systemClock,
    shutdownTimeoutMs: effectiveTimeout(o.shutdownTimeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS),
  });
}
