import { GatewayKernel } from '@kernelwarden/gateway-client';
import { KernelSession } from '@kernelwarden/supervisor';
import { kernelPids, testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CellTimeoutError, createWatchdog, type WatchdogEvent } from './index.js';

const SIGINT_IGNORING_SPIN = 'import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass';

describe('the watchdog on the real jupyter-server (python3), through a KernelSession', () => {
  const rungs: WatchdogEvent[] = [];
  const kernels: GatewayKernel[] = [];
  let session: KernelSession<GatewayKernel>;

  beforeAll(() => {
    const { baseUrl, token } = testGateway();
    const watchdog = createWatchdog({ cellTimeoutMs: 2_000, interruptGraceMs: 1_000, killGraceMs: 1_000 });
    watchdog.on('*', (event) => rungs.push(event));
    session = new KernelSession<GatewayKernel>({
      python: async (ctx) => {
        const kernel = await GatewayKernel.start({ gateway: { baseUrl, token }, signal: ctx.signal });
        kernels.push(kernel);
        return kernel;
      },
      bootstrap: async (lease) => {
        const result = await lease.kernel.execute('BOOTSTRAPPED = True');
        if (result.status !== 'ok') throw new Error(`bootstrap failed: ${result.error?.evalue}`);
      },
      executor: watchdog,
    });
  });

  afterAll(async () => {
    await session?.close();
    for (const kernel of kernels) await kernel.shutdown();
    for (const kernel of kernels) expect(kernelPids(kernel.id)).toEqual([]);
  });

  it('interrupts time.sleep(100) after a 2 s budget and keeps the variables set before it', async () => {
    expect((await session.execute('x = 41', { cellId: 'set-x' })).status).toBe('ok');
    const result = await session.execute('import time\ntime.sleep(100)', { cellId: 'sleepy' });
    expect(result.cellId).toBe('sleepy');
    expect(result.status).toBe('error');
    expect(result.error?.ename).toBe('KeyboardInterrupt');
    expect(result.timedOut).toBe(true);
    expect(rungs.map((r) => r.type)).toEqual(['interrupt']);
    expect(session.status().generation).toBe(0);
    const after = await session.execute('print(x + 1)');
    expect(after.stdout).toBe('42\n');
  });

  it('kills and restarts a SIGINT-ignoring spin: CellTimeoutError, variables gone, generation + 1, no stray process', async () => {
    rungs.length = 0;
    const before = session.status().generation;
    const kernel = kernels.at(-1)!;
    const oldPids = kernelPids(kernel.id);
    expect(oldPids).toHaveLength(1);

    const error = await session.execute(SIGINT_IGNORING_SPIN, { cellId: 'spin' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(CellTimeoutError.isInstance(error)).toBe(true);
    expect((error as CellTimeoutError).code).toBe('CELL_TIMEOUT');
    expect((error as Error).name).toBe('TimeoutError');
    expect((error as Error).message).toMatch(/^cell exceeded 2s .*the kernel was reset/);
    expect(rungs.map((r) => [r.type, r.acted])).toEqual([
      ['interrupt', true],
      ['kill', true],
      ['restart', true],
      ['bootstrap', true],
    ]);

    expect(session.status().generation).toBe(before + 1);
    const next = await session.execute("print('x' in globals(), BOOTSTRAPPED)");
    expect(next.status).toBe('ok');
    expect(next.stdout).toBe('False True\n');
    expect(kernels).toHaveLength(1); // the same kernel object was restarted, no new one built
    const newPids = kernelPids(kernel.id);
    expect(newPids).toHaveLength(1);
    for (const pid of oldPids) expect(newPids).not.toContain(pid);
  });
});
