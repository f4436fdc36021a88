import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { GatewayClient, GatewayKernel, KernelDiedError } from '@kernelwarden/gateway-client';
import { LocalGateway, type LocalGatewayTicket } from '@kernelwarden/local-gateway';
import { PROCESS_STORM_CELL, testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kernelCgroupBases, kernelLimitEvents, listKernelCgroups, removeEmptyKernelCgroups } from './cgroup.js';
import { IsolationUnavailableError } from './errors.js';
import { type BaseKernelSpec, installIsolatedKernelSpec } from './kernelspec.js';
import { removeIsolatedKernelSpecs } from './kernelspec-cleanup.js';
import { detectLimits, type LimitSupport } from './limit-support.js';
import type { KernelLimits } from './limits.js';
import { createKernelPolicy, createReadIsolationPolicy } from './policy.js';

// Limits on real ipykernel and IRkernel kernels, launched by a real jupyter-server (the embedded LocalGateway) under
// real bubblewrap, with the cgroups of this machine (root here: writable cgroup v1 memory and pids hierarchies).

const MiB = 1024 * 1024;
let base: string;
let ws: string;
let ticket: LocalGatewayTicket;
let specs: Record<string, BaseKernelSpec>;
let support: LimitSupport;
const installed: string[] = [];

beforeAll(async () => {
  base = mkdtempSync(join(testGateway().root, 'limits-'));
  ws = join(base, 'ws');
  mkdirSync(ws);
  ticket = await LocalGateway.acquire({ stateDir: join(base, 'state'), lingerMs: 0 });
  const res = await fetch(`${ticket.baseUrl}/api/kernelspecs`, { headers: { Authorization: `token ${ticket.token}` } });
  const listing = (await res.json()) as { kernelspecs: Record<string, { spec: Omit<BaseKernelSpec, 'name'> }> };
  specs = {};
  for (const [name, entry] of Object.entries(listing.kernelspecs)) specs[name] = { name, ...entry.spec };
  support = await detectLimits({ pid: ticket.pid });
}, 120_000);

/**
 * The kernel cgroups of this file's kernelspecs left in the gateway's cgroups or this process's (another gateway's
 * kernels on this machine, whose cgroups sit beside them, are not this file's).
 */
function leftoverCgroups(): string[] {
  const bases = [...kernelCgroupBases({ pid: ticket.pid }), ...kernelCgroupBases()];
  return installed.flatMap((name) => listKernelCgroups(bases, { tag: name.slice(-16) }));
}

afterAll(async () => {
  if (!ticket) return;
  const res = await fetch(`${ticket.baseUrl}/api/kernels`, { headers: { Authorization: `token ${ticket.token}` } });
  const kernels = (await res.json()) as { name: string }[];
  removeIsolatedKernelSpecs({
    kernelSpecDir: ticket.kernelSpecDir,
    names: installed,
    inUse: kernels.map((k) => k.name),
  });
  // A kernel's processes may still be exiting a moment after its shutdown was confirmed (on a loaded machine, longer
  // than the second the removal waits): give their cgroups the time to empty, then remove them.
  const bases = [...kernelCgroupBases({ pid: ticket.pid }), ...kernelCgroupBases()];
  for (const until = Date.now() + 15_000; leftoverCgroups().length > 0 && Date.now() < until; ) {
    await new Promise((r) => setTimeout(r, 250));
    for (const name of installed) removeEmptyKernelCgroups(bases, name.slice(-16));
  }
  const left = leftoverCgroups();
  await ticket.release();
  // Nothing a test made outlives the file: no kernel cgroup (the run's teardown checks kernels and processes).
  expect(left).toEqual([]);
}, 60_000);

type Language = 'python3' | 'ir';

async function limitedSpec(
  language: Language,
  limits: KernelLimits,
  more: { hidden?: boolean; limitSupport?: LimitSupport } = {},
): Promise<string> {
  let policy = createKernelPolicy(limits);
  // With a hidden root the kernel gets a private temp; the base stands in for the system temporary directory.
  const systmp = join(base, 'systmp');
  if (more.hidden) {
    mkdirSync(systmp, { recursive: true });
    const secret = mkdtempSync(join(base, 'secret-'));
    writeFileSync(join(secret, 'secret.txt'), 'TOP-SECRET\n');
    policy = createReadIsolationPolicy({ roots: [{ path: secret, label: 'secret' }], tempDir: systmp, ...limits });
  }
  const name = await installIsolatedKernelSpec({
    kernelSpecDir: ticket.kernelSpecDir,
    baseSpec: specs[language]!,
    policy,
    workspace: ws,
    ...(more.hidden ? { privateTemp: [systmp] } : {}),
    hide: [ticket.stateDir],
    gatewayPid: ticket.pid,
    ...(more.limitSupport ? { limitSupport: more.limitSupport } : {}),
  });
  installed.push(name);
  return name;
}

async function withKernel<T>(kernelName: string, body: (kernel: GatewayKernel) => Promise<T>): Promise<T> {
  const kernel = await GatewayKernel.start({ gateway: ticket, kernelName, startupTimeoutMs: 60_000 });
  try {
    return await body(kernel);
  } finally {
    await kernel.shutdown();
  }
}

async function run(kernel: GatewayKernel, code: string): Promise<string> {
  const result = await kernel.execute(code, { timeoutMs: 60_000 });
  expect(result.status, `${result.stderr}${result.error?.evalue ?? ''}`).toBe('ok');
  return result.stdout;
}

/** Runs `code`, which kills the interpreter, and waits until the server restarted it and a cell runs again. */
async function dieAndComeBack(kernel: GatewayKernel, code: string): Promise<unknown> {
  const died = await kernel.execute(code, { timeoutMs: 90_000 }).catch((error: unknown) => error);
  const deadline = Date.now() + 90_000;
  for (;;) {
    try {
      if ((await kernel.execute('1', { timeoutMs: 10_000 })).status === 'ok') return died;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

const ALLOCATE_2GB: Record<Language, string> = {
  python3: 'b = bytearray(2 << 30)',
  ir: 'x <- numeric(2.7e8)',
};
const SMALL_CELL: Record<Language, string> = {
  python3: 'print(sum(range(10)))',
  ir: 'cat(sum(0:9))',
};

describe.each(['python3', 'ir'] as const)('a %s kernel under memoryBytes', (language) => {
  it('fails a 2 GB allocation under a 512 MB limit in the cell, and the next cell works', async () => {
    const kernelName = await limitedSpec(language, { memoryBytes: 512 * MiB });
    await withKernel(kernelName, async (kernel) => {
      const big = await kernel.execute(ALLOCATE_2GB[language], { timeoutMs: 60_000 });
      expect(big.status).toBe('error');
      if (language === 'python3') expect(big.error?.ename).toBe('MemoryError');
      else expect(`${big.error?.evalue}${big.stderr}`).toMatch(/cannot allocate/);
      expect((await run(kernel, SMALL_CELL[language])).trim()).toBe('45');
      // An allocation that failed in the cell is no out-of-memory kill.
      const events = kernelLimitEvents(kernel.id, { pid: ticket.pid });
      expect(events).toMatchObject({ oomKills: 0, memoryLimitBytes: 512 * MiB });
    });
  });
});

describe.each(['python3', 'ir'] as const)('a %s kernel with network: false', (language) => {
  it('cannot connect to a listener on 127.0.0.1 that a kernel without it reaches', async () => {
    let accepted = 0;
    const server: Server = createServer((socket) => {
      accepted++;
      socket.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    const connect =
      language === 'python3'
        ? `import socket\ntry:\n    socket.create_connection(('127.0.0.1', ${port}), timeout=10).close()\n    print('connected')\nexcept OSError as e:\n    print('refused', type(e).__name__)`
        : `r <- tryCatch({ con <- socketConnection('127.0.0.1', ${port}, blocking = TRUE, timeout = 10); close(con); 'connected' }, error = function(e) 'refused', warning = function(w) 'refused')\ncat(r)`;
    try {
      // Cut off (here with a hidden root too: both together), and the same kernel with the network.
      const cut = await limitedSpec(language, { network: false }, { hidden: language === 'python3' });
      const open = await limitedSpec(language, { memoryBytes: 1024 * MiB });
      await withKernel(cut, async (kernel) => {
        expect((await run(kernel, connect)).trim()).toMatch(/^refused/);
        // It still talks to the gateway (ZMQ over its Unix sockets): this cell's answer came back.
        expect((await run(kernel, SMALL_CELL[language])).trim()).toBe('45');
      });
      expect(accepted).toBe(0);
      await withKernel(open, async (kernel) => {
        expect((await run(kernel, connect)).trim()).toBe('connected');
      });
      expect(accepted).toBe(1);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('maxProcesses', () => {
  it('stops a storm of 300 subprocesses under a limit of 64 (pids cgroup), and the kernel keeps working', async () => {
    expect(support.limits.maxProcesses.mechanisms[0]).toMatch(/^cgroup-v[12]$/);
    const kernelName = await limitedSpec('python3', { maxProcesses: 64 });
    await withKernel(kernelName, async (kernel) => {
      const storm = PROCESS_STORM_CELL;
      const [started, refused] = (await run(kernel, storm)).trim().split(' ').map(Number);
      expect(started).toBeLessThan(64);
      expect(started! + refused!).toBe(300);
      expect(refused).toBeGreaterThan(200);
      expect((await run(kernel, SMALL_CELL.python3)).trim()).toBe('45');
      expect(kernelLimitEvents(kernel.id, { pid: ticket.pid })?.processLimitHits).toBeGreaterThan(0);
    });
  });

  it.runIf(process.getuid?.() === 0)(
    'refuses the kernel, naming the limit and why, where nothing can enforce it (as root, without a pids cgroup)',
    async () => {
      const noPids: LimitSupport = {
        ...support,
        cgroups: {
          controllers: support.cgroups.controllers.filter((c) => c.controller !== 'pids'),
          problems: { pids: 'no pids cgroup (staged)' },
        },
      };
      const before = readdirSync(ticket.kernelSpecDir);
      const refused = await limitedSpec('python3', { maxProcesses: 64 }, { limitSupport: noPids }).catch(
        (error: unknown) => error,
      );
      expect(IsolationUnavailableError.isInstance(refused)).toBe(true);
      const error = refused as IsolationUnavailableError;
      expect(error.reason).toBe('limit-unenforceable');
      expect(error.limit).toBe('maxProcesses');
      expect(error.message).toMatch(/process limit \(maxProcesses\) cannot be enforced here: no writable pids cgroup/);
      expect(error.message).toMatch(/RLIMIT_NPROC for root/);
      expect(readdirSync(ticket.kernelSpecDir)).toEqual(before);
    },
  );
});

describe('cpuSeconds', () => {
  it('kills a busy loop once it used its CPU time, and the restarted kernel has the same limit', async () => {
    const kernelName = await limitedSpec('python3', { cpuSeconds: 4 });
    await withKernel(kernelName, async (kernel) => {
      const started = Date.now();
      const died = await dieAndComeBack(kernel, 'while True:\n    pass');
      expect(KernelDiedError.isInstance(died)).toBe(true);
      // Four seconds of CPU time, on a shared machine: generous bounds.
      expect(Date.now() - started).toBeLessThan(90_000);
      expect(
        await run(kernel, "print([l for l in open('/proc/self/limits') if l.startswith('Max cpu time')][0])"),
      ).toMatch(/Max cpu time\s+4\s+4\s+seconds/);
    });
  });
});

/** What a python cell reports of its own limits: cgroups, rlimits, a 2 GB allocation, network interfaces. */
const LIMITS_NOW = [
  'import os, resource',
  "groups = sorted(l.split(':')[2].strip() for l in open('/proc/self/cgroup') if l.split(':')[1] in ('memory', 'pids'))",
  'try:',
  '    bytearray(2 << 30)',
  "    alloc = 'allocated'",
  'except MemoryError:',
  "    alloc = 'MemoryError'",
  "nets = sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:])",
  'print(groups, resource.getrlimit(resource.RLIMIT_DATA), alloc, nets)',
].join('\n');

describe('limits across restarts', () => {
  it("hold after the server's restart of a kernel that exited and after restart(), in the same cgroup", async () => {
    const kernelName = await limitedSpec('python3', { memoryBytes: 512 * MiB, maxProcesses: 64, network: false });
    await withKernel(kernelName, async (kernel) => {
      const first = (await run(kernel, LIMITS_NOW)).trim();
      expect(first).toContain(`kw-${kernelName.slice(-16)}-${kernel.id}/kernel`);
      expect(first).toContain(`(${512 * MiB}, ${512 * MiB}) MemoryError ['lo']`);
      await dieAndComeBack(kernel, 'import os\nos._exit(1)');
      expect((await run(kernel, LIMITS_NOW)).trim()).toBe(first);
      await kernel.restart();
      expect((await run(kernel, LIMITS_NOW)).trim()).toBe(first);
    });
  });

  it('cannot lift them from inside: rlimits stay, and its cgroups cannot be written or left', async () => {
    const kernelName = await limitedSpec('python3', { memoryBytes: 512 * MiB, maxProcesses: 64 });
    await withKernel(kernelName, async (kernel) => {
      const attempt = [
        'import os, resource',
        'out = []',
        'try:',
        '    resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))',
        "    out.append('rlimit lifted')",
        'except (ValueError, OSError):',
        "    out.append('rlimit kept')",
        "for line in open('/proc/self/cgroup'):",
        "    _, ctl, path = line.strip().split(':', 2)",
        "    if ctl not in ('memory', 'pids'): continue",
        "    kw = os.path.dirname(f'/sys/fs/cgroup/{ctl}{path}')",
        "    for target, value in ((f'{kw}/memory.limit_in_bytes', '-1'), (f'{kw}/pids.max', 'max'), (f'{os.path.dirname(kw)}/cgroup.procs', str(os.getpid()))):",
        '        if not os.path.exists(target): continue',
        '        try:',
        "            open(target, 'w').write(value)",
        "            out.append('WROTE ' + target)",
        '        except OSError as e:',
        '            out.append(e.strerror)',
        'print(out)',
      ].join('\n');
      const said = await run(kernel, attempt);
      expect(said).toContain('rlimit kept');
      expect(said).not.toContain('WROTE');
      expect(said).toContain('Read-only file system');
      const after = kernelLimitEvents(kernel.id, { pid: ticket.pid });
      expect(after?.memoryLimitBytes).toBe(512 * MiB);
    });
  });
});

describe('deaths named', () => {
  it('counts the out-of-memory kill of a kernel its memory cgroup killed', async () => {
    const kernelName = await limitedSpec('python3', { memoryBytes: 512 * MiB });
    await withKernel(kernelName, async (kernel) => {
      expect(kernelLimitEvents(kernel.id, { pid: ticket.pid })?.oomKills).toBe(0);
      // A shared mapping is outside RLIMIT_DATA: touching 2 GB of it is stopped by the cgroup alone, which kills.
      const died = await dieAndComeBack(
        kernel,
        'import mmap\nm = mmap.mmap(-1, 2 << 30)\nfor i in range(0, 2 << 30, 4096):\n    m[i] = 1',
      );
      expect(KernelDiedError.isInstance(died)).toBe(true);
      const events = kernelLimitEvents(kernel.id, { pid: ticket.pid });
      expect(events?.oomKills).toBeGreaterThanOrEqual(1);
      expect(events?.memoryLimitBytes).toBe(512 * MiB);
      // The restarted kernel is in the same cgroup: the count is still there, and it works.
      expect((await run(kernel, SMALL_CELL.python3)).trim()).toBe('45');
    });
  });

  it("is named an out-of-memory death by GatewayKernel when the gateway's diagnostics read the kernel's cgroups", async () => {
    const kernelName = await limitedSpec('python3', { memoryBytes: 512 * MiB });
    const client = new GatewayClient({
      ...ticket,
      diagnostics: {
        ...ticket.diagnostics,
        limitEvents: (id: string) => kernelLimitEvents(id, { pid: ticket.pid }),
      },
    });
    const kernel = await GatewayKernel.start({ gateway: client, kernelName, startupTimeoutMs: 60_000 });
    try {
      await run(kernel, 'x = 41');
      const died = await dieAndComeBack(
        kernel,
        'import mmap\nm = mmap.mmap(-1, 2 << 30)\nfor i in range(0, 2 << 30, 4096):\n    m[i] = 1',
      );
      expect(KernelDiedError.isInstance(died), String(died)).toBe(true);
      expect((died as KernelDiedError).reason).toBe('oom');
      expect((died as Error).message).toMatch(
        /killed for using more than its memory limit \(512 MiB\); the server restarted it, so its variables are gone/,
      );
      // A MemoryError inside the limit is an ordinary cell error: the kernel lives on, nothing is called a death.
      const inside = await kernel.execute('b = bytearray(2 << 30)', { timeoutMs: 60_000 });
      expect(inside.status).toBe('error');
      expect(inside.error?.ename).toBe('MemoryError');
      expect((await run(kernel, "print('x' in dir())")).trim()).toBe('False');
    } finally {
      await kernel.shutdown();
    }
  });
});

describe('kernel cgroups', () => {
  it("are removed by the next launch once their kernel is gone, and with the spec, and never a running kernel's", async () => {
    const kernelName = await limitedSpec('python3', { memoryBytes: 512 * MiB });
    const tag = kernelName.slice(-16);
    const bases = kernelCgroupBases({ pid: ticket.pid });
    const first = await withKernel(kernelName, async (kernel) => {
      expect(listKernelCgroups(bases, { tag }).map((d) => d.split('/').at(-1))).toEqual([`kw-${tag}-${kernel.id}`]);
      return kernel.id;
    });
    await withKernel(kernelName, async (kernel) => {
      const names = listKernelCgroups(bases, { tag }).map((d) => d.split('/').at(-1));
      expect(names).toContain(`kw-${tag}-${kernel.id}`);
      expect(names).not.toContain(`kw-${tag}-${first}`);
      // A sweep while it runs leaves the running kernel's cgroup alone.
      removeEmptyKernelCgroups(bases, tag);
      expect(listKernelCgroups(bases, { tag })).toHaveLength(1);
    });
    removeIsolatedKernelSpecs({ kernelSpecDir: ticket.kernelSpecDir, names: [kernelName], inUse: [] });
    expect(listKernelCgroups(bases, { tag })).toEqual([]);
  });
});
