import { isTimeoutError } from '@kernelwarden/core';
import { ManualClock } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import type { GatewayClient } from './gateway-client.js';
import { RestartRecovery } from './restart-recovery.js';
import { SendGate } from './send-gate.js';

const flush = async () => {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

function setup(
  opts: {
    reconnect?: (signal: AbortSignal | undefined) => Promise<void>;
    gone?: boolean;
    oomDeath?: () => { memoryLimitBytes: number | undefined } | undefined;
  } = {},
) {
  const clock = new ManualClock();
  const log: string[] = [];
  const gate = new SendGate();
  const client = {
    baseUrl: 'http://gw',
    restartKernel: async (_id: string, o: { timeoutMs?: number }) => {
      log.push(`POST restart (${o.timeoutMs} ms)`);
      return { id: 'k', name: 'python3' };
    },
  } as unknown as GatewayClient;
  const state = { alive: true, failed: [] as unknown[] };
  const recovery = new RestartRecovery({
    clock,
    client,
    kernelId: () => 'k',
    restartTimeoutMs: 120_000,
    recovery: { timeoutMs: 30_000, attemptTimeoutMs: 5000, maxAttemptTimeoutMs: 10_000 },
    gate,
    cells: { failAll: (error) => state.failed.push(error) },
    reconnect:
      opts.reconnect ??
      (async () => {
        log.push('reconnect');
      }),
    alive: () => state.alive,
    checkGone: async () => {
      log.push('check REST');
      return opts.gone ?? false;
    },
    giveUp: (cause) => log.push(`give up: ${isTimeoutError(cause) ? 'timeout' : String(cause)}`),
    ready: () => log.push('ready'),
    ...(opts.oomDeath ? { oomDeath: opts.oomDeath } : {}),
  });
  return { clock, log, gate, state, recovery };
}

describe('RestartRecovery', () => {
  it('restarts over REST, then reconnects, holding requests until the handshake is done', async () => {
    const { log, gate, recovery } = setup();
    const restarting = recovery.restart(undefined);
    expect(recovery.restarting).toBe(true);
    gate.whenOpen(() => log.push('request sent'));
    await restarting;
    await flush();
    expect(log).toEqual(['POST restart (120000 ms)', 'reconnect', 'ready', 'request sent']);
    expect(recovery.restarting).toBe(false);
  });

  it('takes a restarting status during its own restart for its own, and fails nothing', async () => {
    const { state, recovery } = setup();
    const restarting = recovery.restart(undefined);
    recovery.serverRestarting();
    await restarting;
    expect(state.failed).toEqual([]);
    expect(recovery.recovering).toBe(false);
  });

  it('after a server restart fails the cells in flight with reason restarted and reconnects once', async () => {
    const { log, state, recovery } = setup();
    recovery.serverRestarting();
    recovery.serverRestarting();
    expect(recovery.recovering).toBe(true);
    await flush();
    expect(state.failed).toHaveLength(2);
    expect(state.failed[0]).toMatchObject({ code: 'KERNEL_DIED', reason: 'restarted', kernelId: 'k' });
    expect(log).toEqual(['reconnect', 'ready']);
    expect(recovery.recovering).toBe(false);
  });

  it("names a death the kernel's memory limit caused: reason oom, with the limit in the message", async () => {
    const { state, recovery } = setup({ oomDeath: () => ({ memoryLimitBytes: 512 * 1024 ** 2 }) });
    recovery.serverRestarting();
    await flush();
    expect(state.failed[0]).toMatchObject({ code: 'KERNEL_DIED', reason: 'oom', kernelId: 'k', retryable: true });
    expect((state.failed[0] as Error).message).toMatch(
      /was killed for using more than its memory limit \(512 MiB\); the server restarted it, so its variables are gone/,
    );
  });

  it('gives each reconnect attempt a growing bound, and gives up at the overall deadline unless REST says gone', async () => {
    const bounds: number[] = [];
    let clockRef: ManualClock | undefined;
    const { clock, log, recovery } = setup({
      reconnect: (signal) => {
        const started = clockRef?.now() ?? 0;
        return new Promise<void>((_, reject) => {
          signal?.addEventListener('abort', () => {
            bounds.push((clockRef?.now() ?? 0) - started);
            reject(signal.reason);
          });
        });
      },
    });
    clockRef = clock;
    recovery.recover();
    await clock.advance(30_000);
    await flush();
    expect(bounds.slice(0, 3)).toEqual([5000, 10_000, 10_000]);
    expect(log).toEqual(['check REST', 'give up: timeout']);
    expect(clock.pendingTimers()).toBe(0);
  });
});
