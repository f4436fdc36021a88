import { abortScope, emptyResult, isTimeoutError } from '@kernelwarden/core';
import { ManualClock } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { KernelStartError } from './errors.js';
import type { GatewayClient } from './gateway-client.js';
import { createKernel } from './kernel-create.js';
import { runStartStep } from './kernel-start.js';

const opts = (clock: ManualClock) => ({
  kernelName: 'python3',
  createAttempts: 3,
  createRetryDelayMs: 200,
  clock,
  cleanupTimeoutMs: 0,
  cleanupRetry: { attempts: 1, initialDelayMs: 1, maxDelayMs: 1 },
  abandonedCreateWaitMs: 60_000,
  startupTimeoutMs: 60_000,
});

describe('createKernel', () => {
  it('retries a create that answers 5xx, waiting createRetryDelayMs times the attempt', async () => {
    const clock = new ManualClock();
    const calls: number[] = [];
    const client = {
      createKernel: async () => {
        calls.push(clock.now());
        if (calls.length < 3) throw new KernelStartError('busy', { status: 503 });
        return { id: 'k', name: 'python3' };
      },
    } as unknown as GatewayClient;
    using scope = abortScope({ clock });
    const created = createKernel(client, opts(clock), scope);
    await clock.advance(200);
    await clock.advance(400);
    await expect(created).resolves.toEqual({ id: 'k', name: 'python3' });
    expect(calls).toEqual([0, 200, 600]);
  });

  it('does not retry a 4xx, and gives up after createAttempts', async () => {
    const clock = new ManualClock();
    let calls = 0;
    const failing = (status: number) =>
      ({
        createKernel: async () => {
          calls++;
          throw new KernelStartError('no', { status });
        },
      }) as unknown as GatewayClient;
    using scope = abortScope({ clock });
    await expect(createKernel(failing(404), opts(clock), scope)).rejects.toMatchObject({ status: 404 });
    expect(calls).toBe(1);
    calls = 0;
    const created = createKernel(failing(500), opts(clock), scope).catch((e: unknown) => e);
    await clock.advance(200);
    await clock.advance(400);
    expect(await created).toMatchObject({ status: 500 });
    expect(calls).toBe(3);
  });
});

describe('runStartStep', () => {
  it('rejects a step that raised with KernelStartError naming the step and the error', async () => {
    using scope = abortScope({});
    const raised = async () =>
      emptyResult('c', { status: 'error', error: { ename: 'NameError', evalue: 'x', traceback: [] } });
    await expect(runStartStep(raised, 'x', 'prelude', scope)).rejects.toThrow(
      'Failed to initialize kernel prelude: NameError: x',
    );
  });

  it("rejects a step cut by the deadline with TimeoutError, and by the caller with the caller's reason", async () => {
    const clock = new ManualClock();
    using timed = abortScope({ timeoutMs: 10, clock });
    await clock.advance(10);
    const cancelled = async () => emptyResult('c', { status: 'aborted', cancelled: true });
    const error = await runStartStep(cancelled, 'x', 'environment', timed).catch((e: unknown) => e);
    expect(isTimeoutError(error)).toBe(true);
    expect((error as Error).message).toBe('Failed to initialize kernel environment');
    const controller = new AbortController();
    using aborted = abortScope({ signal: controller.signal });
    controller.abort(new Error('caller gave up'));
    await expect(runStartStep(cancelled, 'x', 'environment', aborted)).rejects.toThrow('caller gave up');
  });
});
