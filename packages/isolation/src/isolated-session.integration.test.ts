import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ReadIsolationPolicy } from '@kernelwarden/core';
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway, type LocalGatewayTicket } from '@kernelwarden/local-gateway';
import { KernelSession, PYTHON_SLOT, type SlotFactoryContext } from '@kernelwarden/supervisor';
import { kernelPids, testGateway } from '@kernelwarden/test-env';
import { createWatchdog } from '@kernelwarden/watchdog';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IsolationUnavailableError } from './errors.js';
import { prepareIsolatedKernel } from './gateway-kernelspec.js';
import { createReadIsolationPolicy } from './policy.js';

// The whole launch path as the CLI composes it: LocalGateway -> KernelSession({ readIsolation }) -> a factory that
// installs the isolated kernelspec into the ticket's kernelSpecDir -> GatewayKernel, with the watchdog as executor.

let base: string;
let ticket: LocalGatewayTicket;
let policy: ReadIsolationPolicy;
let ws: string;
let systmp: string;
let secret: string;

beforeAll(async () => {
  base = mkdtempSync(join(testGateway().root, 'isolation-session-'));
  systmp = join(base, 'systmp');
  const vault = join(base, 'vault');
  ws = join(base, 'ws');
  for (const dir of [systmp, vault, ws]) mkdirSync(dir);
  secret = join(vault, 'secret.txt');
  writeFileSync(secret, 'TOP-SECRET\n');
  policy = createReadIsolationPolicy({ roots: [{ path: vault, label: 'vault' }], tempDir: systmp });
  ticket = await LocalGateway.acquire({ stateDir: join(base, 'state'), lingerMs: 0 });
}, 120_000);

afterAll(async () => {
  await ticket?.release();
});

function pythonFactory(searchPath?: string) {
  return async (ctx: SlotFactoryContext) => {
    const kernelName = ctx.readIsolation
      ? await prepareIsolatedKernel({
          gateway: ticket,
          kernelName: 'python3',
          policy: ctx.readIsolation,
          workspace: ctx.cwd ?? ws,
          privateTemp: [systmp],
          ...(searchPath ? { searchPath } : {}),
          signal: ctx.signal,
        })
      : 'python3';
    return GatewayKernel.start({ gateway: ticket, kernelName, cwd: ctx.cwd ?? ws, signal: ctx.signal });
  };
}

const READ_SECRET = (path: string) => `
try:
    open(${JSON.stringify(path)}).read()
    print('LEAK')
except OSError as e:
    print('denied', type(e).__name__)
`;

describe('an isolated kernel in a KernelSession over LocalGateway', () => {
  it('survives the watchdog ladder: a cell ignoring interrupts is interrupted, killed, the exact lease restarted, and the kernel is still isolated', async () => {
    const bootstrapped: number[] = [];
    const session = new KernelSession({
      python: pythonFactory(),
      executor: createWatchdog({ cellTimeoutMs: 3_000, interruptGraceMs: 3_000, killGraceMs: 15_000 }),
      cwd: ws,
      readIsolation: policy,
      bootstrap: (l) => {
        bootstrapped.push(l.generation);
      },
    });
    try {
      const first = await session.execute(READ_SECRET(secret));
      expect(first.stdout.trim()).toBe('denied FileNotFoundError');
      const before = session.supervisor.lease(PYTHON_SLOT)!;
      const pidsBefore = kernelPids(before.kernel.id);
      expect(pidsBefore.length).toBeGreaterThanOrEqual(2);

      // A plain long cell: the interrupt rung ends it and its result comes back.
      const interrupted = await session.execute('import time\ntime.sleep(60)');
      expect(interrupted.error?.ename).toBe('KeyboardInterrupt');
      expect(session.supervisor.lease(PYTHON_SLOT)!.generation).toBe(before.generation);

      // A cell that swallows KeyboardInterrupt: kill, restart the same lease, re-bootstrap, CellTimeoutError.
      const stubborn =
        'import time\nwhile True:\n    try:\n        time.sleep(100)\n    except KeyboardInterrupt:\n        pass';
      const timeout = await session.execute(stubborn).catch((e: unknown) => e);
      if (!session.supervisor.lease(PYTHON_SLOT))
        console.log('LADDER', timeout, session.supervisor.status(PYTHON_SLOT));
      expect(timeout).toMatchObject({ name: 'TimeoutError' });
      const after = session.supervisor.lease(PYTHON_SLOT)!;
      expect(after.kernel).toBe(before.kernel);
      expect(after.generation).toBe(before.generation + 1);
      expect(bootstrapped).toEqual([before.generation, before.generation + 1]);
      // The old interpreter and its sandbox are gone; the new one is isolated the same way.
      for (const pid of pidsBefore) expect(kernelPids(before.kernel.id)).not.toContain(pid);
      const again = await session.execute(READ_SECRET(secret));
      expect(again.stdout.trim()).toBe('denied FileNotFoundError');
    } finally {
      await session.close();
    }
    const id = session.supervisor.lease(PYTHON_SLOT)?.kernel.id;
    if (id) expect(kernelPids(id)).toEqual([]);
  });

  it('refuses to start a kernel with a policy when bubblewrap is unavailable; without a policy it starts', async () => {
    const isolated = new KernelSession({ python: pythonFactory('/nonexistent'), cwd: ws, readIsolation: policy });
    try {
      const error = await isolated.execute('print(1)').catch((e: unknown) => e);
      // The session reports the factory's failure as its own KernelFactoryError, with ours as the cause.
      const refusal = IsolationUnavailableError.isInstance(error) ? error : (error as Error).cause;
      expect(IsolationUnavailableError.isInstance(refusal)).toBe(true);
      expect(refusal).toMatchObject({ code: 'ISOLATION_UNAVAILABLE', reason: 'no-bubblewrap' });
      expect(isolated.supervisor.lease(PYTHON_SLOT)).toBeUndefined();
    } finally {
      await isolated.close();
    }
    const plain = new KernelSession({ python: pythonFactory('/nonexistent'), cwd: ws });
    try {
      expect((await plain.execute('print(1 + 1)')).stdout.trim()).toBe('2');
    } finally {
      await plain.close();
    }
  });
});
