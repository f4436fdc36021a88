import { describe, expect, it } from 'vitest';
import type { KernelDiagnostics } from './gateway-client-options.js';
import { formatBytes, LimitDeaths } from './limit-deaths.js';

function diagnostics(readings: Array<{ oomKills: number; memoryLimitBytes?: number } | undefined | Error>) {
  const calls: string[] = [];
  const d: KernelDiagnostics = {
    processAlive: () => true,
    stderrTail: () => [],
    limitEvents: (id) => {
      calls.push(id);
      const next = readings.shift();
      if (next instanceof Error) throw next;
      return next;
    },
  };
  return { d, calls };
}

describe('LimitDeaths', () => {
  it('names a death after the out-of-memory count rose since the last mark, once', () => {
    const { d, calls } = diagnostics([{ oomKills: 1 }, { oomKills: 2, memoryLimitBytes: 536870912 }, { oomKills: 2 }]);
    const limits = new LimitDeaths(d, 'k1');
    limits.mark();
    expect(limits.oomDeath()).toEqual({ memoryLimitBytes: 536870912 });
    expect(limits.oomDeath()).toBeUndefined();
    expect(calls).toEqual(['k1', 'k1', 'k1']);
  });

  it('absorbs a kill the kernel survived into the next mark', () => {
    const { d } = diagnostics([{ oomKills: 0 }, { oomKills: 1 }, { oomKills: 1 }]);
    const limits = new LimitDeaths(d, 'k');
    limits.mark();
    limits.mark();
    expect(limits.oomDeath()).toBeUndefined();
  });

  it('says nothing without limit counters, without a baseline, or when reading throws', () => {
    expect(new LimitDeaths(undefined, 'k').oomDeath()).toBeUndefined();
    const { d } = diagnostics([undefined, { oomKills: 3 }]);
    const noBaseline = new LimitDeaths(d, 'k');
    noBaseline.mark();
    expect(noBaseline.oomDeath()).toBeUndefined();
    const { d: throwing } = diagnostics([{ oomKills: 0 }, new Error('cgroup gone')]);
    const failing = new LimitDeaths(throwing, 'k');
    failing.mark();
    expect(failing.oomDeath()).toBeUndefined();
  });
});

describe('formatBytes', () => {
  it('writes whole binary units', () => {
    expect(formatBytes(512 * 1024 ** 2)).toBe('512 MiB');
    expect(formatBytes(2 * 1024 ** 3)).toBe('2 GiB');
    expect(formatBytes(1000)).toBe('1000 bytes');
  });
});
