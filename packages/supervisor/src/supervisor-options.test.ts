import { InvalidOptionsError, systemClock } from '@kernelwarden/core';
import { ManualClock } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { DEFAULT_IDLE_TTL_MS, resolveSupervisorOptions } from './supervisor-options.js';

describe('resolveSupervisorOptions', () => {
  it('applies the defaults: no idle expiry, the system clock, the kernel’s own shutdown timeout', () => {
    expect(DEFAULT_IDLE_TTL_MS).toBe(0);
    expect(resolveSupervisorOptions()).toEqual({
      idleTtlMs: undefined,
      clock: systemClock,
      shutdownTimeoutMs: undefined,
    });
  });

  it('keeps a positive timeout and the injected clock; 0, negative and infinite ones turn it off', () => {
    const clock = new ManualClock();
    expect(resolveSupervisorOptions({ idleTtlMs: 500, clock, shutdownTimeoutMs: 2000 })).toEqual({
      idleTtlMs: 500,
      clock,
      shutdownTimeoutMs: 2000,
    });
    for (const off of [0, -1, Number.POSITIVE_INFINITY]) {
      expect(resolveSupervisorOptions({ idleTtlMs: off }).idleTtlMs).toBeUndefined();
    }
  });

  it('names every bad field under "options"', () => {
    let caught: unknown;
    try {
      resolveSupervisorOptions({ idleTtlMs: Number.NaN, clock: { now: () => 0 } as never });
    } catch (error) {
      caught = error;
    }
    expect(InvalidOptionsError.isInstance(caught)).toBe(true);
    expect((caught as InvalidOptionsError).issues.map((issue) => issue.path)).toEqual([
      'options.idleTtlMs',
      'options.clock',
    ]);
  });
});
