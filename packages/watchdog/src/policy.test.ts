import { systemClock } from '@kernelwarden/core';
import { describe, expect, it } from 'vitest';
import {
  CELL_TIMEOUT_ENV,
  cellTimeoutFromEnv,
  DEFAULT_CELL_TIMEOUT_MS,
  DEFAULT_INTERRUPT_GRACE_MS,
  DEFAULT_KILL_GRACE_MS,
  DEFAULT_KILL_TIMEOUT_MS,
  resolveWatchdogPolicy,
} from './policy.js';

describe('cellTimeoutFromEnv', () => {
  it('defaults to 900 s when KERNELWARDEN_CELL_TIMEOUT is unset or blank', () => {
    expect(DEFAULT_CELL_TIMEOUT_MS).toBe(900_000);
    expect(cellTimeoutFromEnv({})).toBe(900_000);
    expect(cellTimeoutFromEnv({ [CELL_TIMEOUT_ENV]: '  ' })).toBe(900_000);
  });

  it('reads seconds, fractions included', () => {
    expect(cellTimeoutFromEnv({ [CELL_TIMEOUT_ENV]: '120' })).toBe(120_000);
    expect(cellTimeoutFromEnv({ [CELL_TIMEOUT_ENV]: ' 0.5 ' })).toBe(500);
  });

  it('disables the budget for 0, negative, infinite or unparsable values', () => {
    for (const raw of ['0', '-5', 'inf', 'Infinity', '1e999', 'abc', '10s', 'NaN']) {
      expect(cellTimeoutFromEnv({ [CELL_TIMEOUT_ENV]: raw }), raw).toBeUndefined();
    }
  });
});

describe('resolveWatchdogPolicy', () => {
  it('takes the budget from the environment only when the policy has none', () => {
    const env = { [CELL_TIMEOUT_ENV]: '30' };
    expect(resolveWatchdogPolicy({}, env).cellTimeoutMs).toBe(30_000);
    expect(resolveWatchdogPolicy({ cellTimeoutMs: 2_000 }, env).cellTimeoutMs).toBe(2_000);
    expect(resolveWatchdogPolicy({ cellTimeoutMs: 0 }, env).cellTimeoutMs).toBeUndefined();
    expect(resolveWatchdogPolicy({}, { [CELL_TIMEOUT_ENV]: '0' }).cellTimeoutMs).toBeUndefined();
  });

  it('fills in 10 s graces and the system clock', () => {
    const policy = resolveWatchdogPolicy(undefined, {});
    expect(policy).toEqual({
      cellTimeoutMs: 900_000,
      interruptGraceMs: 10_000,
      killGraceMs: 10_000,
      killTimeoutMs: 60_000,
      clock: systemClock,
    });
    expect([DEFAULT_INTERRUPT_GRACE_MS, DEFAULT_KILL_GRACE_MS, DEFAULT_KILL_TIMEOUT_MS]).toEqual([
      10_000, 10_000, 60_000,
    ]);
    expect(Object.isFrozen(policy)).toBe(true);
  });

  it('refuses an unknown field at its own path, and a policy that is not an object at "policy"', () => {
    expect(() => resolveWatchdogPolicy({ cellTimeout: 5 } as never, {})).toThrow(
      expect.objectContaining({ path: 'policy.cellTimeout' }),
    );
    expect(() => resolveWatchdogPolicy(null as never, {})).toThrow(expect.objectContaining({ path: 'policy' }));
  });

  it('accepts zero graces', () => {
    const policy = resolveWatchdogPolicy({ interruptGraceMs: 0, killGraceMs: 0 }, {});
    expect([policy.interruptGraceMs, policy.killGraceMs]).toEqual([0, 0]);
  });
});
