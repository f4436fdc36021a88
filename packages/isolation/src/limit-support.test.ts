import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { CgroupController } from './cgroup.js';
import { IsolationUnavailableError } from './errors.js';
import { detectLimits, type LimitFacts, limitStatuses, planLimits } from './limit-support.js';

const MiB = 1024 * 1024;

function controller(over: Partial<CgroupController> & Pick<CgroupController, 'controller'>): CgroupController {
  const v1 = (over.version ?? 1) === 1;
  return {
    version: 1,
    mount: v1 ? `/sys/fs/cgroup/${over.controller}` : '/sys/fs/cgroup',
    mountRoot: '/',
    key: v1 ? over.controller : '',
    up: v1 ? 0 : 1,
    base: v1 ? `/sys/fs/cgroup/${over.controller}/session` : '/sys/fs/cgroup/user.slice',
    files: [],
    ...over,
  };
}

function facts(over: Partial<LimitFacts> = {}): LimitFacts {
  return {
    sandbox: { available: true },
    cgroups: { controllers: [controller({ controller: 'memory' }), controller({ controller: 'pids' })], problems: {} },
    prlimitPath: '/usr/bin/prlimit',
    root: true,
    networkNamespace: { available: true },
    ...over,
  };
}

const noCgroups: LimitFacts['cgroups'] = {
  controllers: [],
  problems: { memory: 'cannot create a cgroup in /sys/fs/cgroup/memory (EACCES)', pids: 'none mounted' },
};

function refusal(run: () => unknown): IsolationUnavailableError {
  try {
    run();
  } catch (error) {
    expect(IsolationUnavailableError.isInstance(error)).toBe(true);
    return error as IsolationUnavailableError;
  }
  throw new Error('expected a refusal');
}

describe('planLimits', () => {
  it('puts memory and processes in cgroups v1, memory also as RLIMIT_DATA, CPU time as RLIMIT_CPU', () => {
    const memory = controller({
      controller: 'memory',
      files: ['memory.limit_in_bytes', 'memory.memsw.limit_in_bytes'],
    });
    const plan = planLimits(
      { memoryBytes: 512 * MiB, maxProcesses: 64, cpuSeconds: 2.2, network: false },
      facts({ cgroups: { controllers: [memory, controller({ controller: 'pids' })], problems: {} } }),
    );
    expect(plan.cgroups.map((c) => [c.limit, c.controller.controller, c.settings])).toEqual([
      [
        'memoryBytes',
        'memory',
        [
          ['memory.limit_in_bytes', String(512 * MiB)],
          ['memory.memsw.limit_in_bytes', String(512 * MiB)],
        ],
      ],
      ['maxProcesses', 'pids', [['pids.max', '64']]],
    ]);
    expect(plan.rlimits).toEqual({ data: 512 * MiB, cpu: 3 });
    expect(plan.unshareNet).toBe(true);
    expect(plan.prlimitPath).toBe('/usr/bin/prlimit');
    expect(plan.mechanisms).toEqual({
      memoryBytes: ['cgroup-v1', 'rlimit'],
      maxProcesses: ['cgroup-v1'],
      cpuSeconds: ['rlimit'],
      network: ['network-namespace'],
    });
  });

  it('writes memory.max and no swap on cgroup v2', () => {
    const memory = controller({ controller: 'memory', version: 2, files: ['memory.max', 'memory.swap.max'] });
    const plan = planLimits({ memoryBytes: 256 * MiB }, facts({ cgroups: { controllers: [memory], problems: {} } }));
    expect(plan.cgroups[0]?.settings).toEqual([
      ['memory.max', String(256 * MiB)],
      ['memory.swap.max', '0'],
    ]);
    expect(plan.mechanisms.memoryBytes).toEqual(['cgroup-v2', 'rlimit']);
  });

  it('falls back to rlimits without a writable cgroup: RLIMIT_DATA, and RLIMIT_NPROC when not root', () => {
    const plan = planLimits({ memoryBytes: 512 * MiB, maxProcesses: 64 }, facts({ cgroups: noCgroups, root: false }));
    expect(plan.cgroups).toEqual([]);
    expect(plan.rlimits).toEqual({ data: 512 * MiB, nproc: 64 });
    expect(plan.mechanisms).toEqual({ memoryBytes: ['rlimit'], maxProcesses: ['rlimit'] });
    expect(plan.unshareNet).toBe(false);
  });

  it('asks for nothing when the policy has no limit (network: true is the default)', () => {
    expect(planLimits({ network: true }, facts())).toEqual({
      cgroups: [],
      rlimits: {},
      unshareNet: false,
      mechanisms: {},
      prlimitPath: undefined,
    });
  });

  it('refuses maxProcesses as root without a pids cgroup, naming the limit and why', () => {
    const error = refusal(() =>
      planLimits({ memoryBytes: 512 * MiB, maxProcesses: 64 }, facts({ cgroups: noCgroups })),
    );
    expect(error.reason).toBe('limit-unenforceable');
    expect(error.limit).toBe('maxProcesses');
    expect(error.message).toBe(
      'The kernel was not started: its process limit (maxProcesses) cannot be enforced here: no writable pids cgroup ' +
        '(none mounted), and Linux does not enforce RLIMIT_NPROC for root: run kernelwarden as a non-root user, or ' +
        'where it can write a pids cgroup',
    );
  });

  it('refuses what needs prlimit without it, what needs a network namespace without one, and all without a sandbox', () => {
    expect(refusal(() => planLimits({ cpuSeconds: 10 }, facts({ prlimitPath: undefined }))).limit).toBe('cpuSeconds');
    expect(
      refusal(() => planLimits({ memoryBytes: 512 * MiB }, facts({ prlimitPath: undefined, cgroups: noCgroups })))
        .message,
    ).toMatch(
      /memory limit \(memoryBytes\) cannot be enforced here: no writable memory cgroup \(cannot create .*EACCES\)\) and no prlimit/,
    );
    expect(
      refusal(() => planLimits({ network: false }, facts({ networkNamespace: { available: false, message: 'EPERM' } })))
        .limit,
    ).toBe('network');
    const none = refusal(() =>
      planLimits({ memoryBytes: 512 * MiB }, facts({ sandbox: { available: false, message: 'no bwrap' } })),
    );
    expect(none.message).toMatch(/needs the bubblewrap sandbox .*: no bwrap/);
  });

  it('keeps memory on the cgroup alone when there is no prlimit', () => {
    const plan = planLimits({ memoryBytes: 512 * MiB }, facts({ prlimitPath: undefined }));
    expect(plan.mechanisms.memoryBytes).toEqual(['cgroup-v1']);
    expect(plan.rlimits).toEqual({});
    expect(plan.prlimitPath).toBeUndefined();
  });
});

describe('limitStatuses', () => {
  it('says for each limit what enforces it here, or why nothing can', () => {
    const statuses = limitStatuses(
      facts({ cgroups: { controllers: [controller({ controller: 'memory' })], problems: { pids: 'none mounted' } } }),
    );
    expect(statuses.memoryBytes).toMatchObject({ enforceable: true, mechanisms: ['cgroup-v1', 'rlimit'] });
    expect(statuses.memoryBytes.detail).toMatch(
      /cgroup v1 memory controller .*\/sys\/fs\/cgroup\/memory\/session.*RLIMIT_DATA/,
    );
    expect(statuses.maxProcesses).toMatchObject({ enforceable: false, mechanisms: [] });
    expect(statuses.maxProcesses.detail).toMatch(/^not enforceable: no writable pids cgroup \(none mounted\)/);
    expect(statuses.cpuSeconds).toMatchObject({ enforceable: true, mechanisms: ['rlimit'] });
    expect(statuses.network).toMatchObject({ enforceable: true, mechanisms: ['network-namespace'] });
  });
});

describe('detectLimits', () => {
  it('reports this machine without throwing, and leaves no probe cgroup behind', async () => {
    const support = await detectLimits();
    expect(Object.keys(support.limits).sort()).toEqual(['cpuSeconds', 'maxProcesses', 'memoryBytes', 'network']);
    for (const c of support.cgroups.controllers) {
      expect(c.base.startsWith(c.mount)).toBe(true);
      expect(readdirSync(c.base).filter((n) => n.startsWith('kw-probe-'))).toEqual([]);
    }
    expect(support.root).toBe(process.getuid?.() === 0);
  });
});
