import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway, type LocalGatewayTicket } from '@kernelwarden/local-gateway';
import { KernelSession } from '@kernelwarden/supervisor';
import { kernelPids, testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CellTimeoutError, createWatchdog, type WatchdogEvent } from './index.js';

const SIGINT_IGNORING_SPIN = 'import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass';

describe('the watchdog on the embedded gateway with a warm pool (python3)', () => {
  const stateDir = join(testGateway().root, `watchdog-pool-${randomBytes(4).toString('hex')}`);
  const rungs: WatchdogEvent[] = [];
  const kernels: GatewayKernel[] = [];
  let ticket: LocalGatewayTicket;
  let session: KernelSession<GatewayKernel>;

  /** Resolves once the pool has `count` ready kernels. */
  async function poolReady(count: number): Promise<void> {
    const until = Date.now() + 60_000;
    while ((await LocalGateway.status({ stateDir })).pool.python3?.ready !== count) {
      if (Date.now() > until) throw new Error(`the pool never had ${count} ready kernels`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  beforeAll(async () => {
    mkdirSync(stateDir, { recursive: true });
    ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool: { python3: 1 } });
    const watchdog = createWatchdog({ cellTimeoutMs: 2_000, interruptGraceMs: 1_000, killGraceMs: 1_000 });
    watchdog.on('*', (event) => rungs.push(event));
    session = new KernelSession<GatewayKernel>({
      python: async (ctx) => {
        const kernel = await GatewayKernel.start({ gateway: ticket, signal: ctx.signal, env: { KW_PROBE: 'kept' } });
        kernels.push(kernel);
        return kernel;
      },
      bootstrap: async (l) => {
        const result = await l.kernel.execute('BOOTSTRAPPED = True');
        if (result.status !== 'ok') throw new Error(`bootstrap failed: ${result.error?.evalue}`);
      },
      executor: watchdog,
    });
  });

  afterAll(async () => {
    await session?.close();
    for (const kernel of kernels) await kernel.shutdown();
    await ticket?.release();
    await LocalGateway.stop({ stateDir, stopTimeoutMs: 5_000 });
    for (const kernel of kernels) expect(kernelPids(kernel.id)).toEqual([]);
  });

  it('kills a SIGINT-ignoring spin at once and answers the next cell on a pooled kernel, variables gone', async () => {
    await poolReady(1);
    expect((await session.execute('x = 41')).status).toBe('ok');
    await poolReady(1); // the first kernel was the pool's; the next is ready for the kill
    const kernel = kernels[0]!;
    const killedId = kernel.id;
    const killedPids = kernelPids(killedId);
    expect(killedPids).toHaveLength(1);
    const before = session.status().generation;

    const error = await session.execute(SIGINT_IGNORING_SPIN, { cellId: 'spin' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(CellTimeoutError.isInstance(error)).toBe(true);
    // Gone at once: nothing of the killed kernel runs when the ladder ends, its processes were SIGKILLed.
    expect(kernelPids(killedId)).toEqual([]);
    for (const pid of killedPids) expect(() => process.kill(pid, 0)).toThrow();
    expect(rungs.map((r) => [r.type, r.acted])).toEqual([
      ['interrupt', true],
      ['kill', true],
      ['restart', true],
      ['bootstrap', true],
    ]);
    // The kill did not wait for a graceful shutdown nor a cold start (generous: those alone take seconds).
    const kill = rungs.find((r) => r.type === 'kill')!;
    const restart = rungs.find((r) => r.type === 'restart')!;
    expect(restart.at - kill.at).toBeLessThan(10_000);

    expect(session.status().generation).toBe(before + 1);
    const next = await session.execute("import os; print('x' in globals(), BOOTSTRAPPED, os.environ.get('KW_PROBE'))");
    expect(next.stdout).toBe('False True kept\n');
    expect(kernels).toHaveLength(1); // the same handle, moved to a pooled kernel
    expect(kernel.id).not.toBe(killedId);
    const status = await LocalGateway.status({ stateDir });
    expect(status.kernels.map((k) => k.id)).not.toContain(killedId);
  });
});
