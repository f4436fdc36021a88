import { ManualClock } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import type { GatewayClient } from './gateway-client.js';
import { LivenessPoll, probeKernel } from './liveness.js';

function setup(everyMs = 100) {
  const clock = new ManualClock();
  const socket = { received: 0, isReconnecting: false };
  const state = { busy: true, recovering: false, gone: false, checks: 0 };
  const poll = new LivenessPoll({
    clock,
    everyMs,
    socket,
    busy: () => state.busy,
    recovering: () => state.recovering,
    check: async () => {
      state.checks++;
      return state.gone;
    },
  });
  return { clock, socket, state, poll };
}

describe('LivenessPoll', () => {
  it('asks REST only when the socket stayed quiet for a whole interval', async () => {
    const { clock, socket, state, poll } = setup();
    poll.schedule();
    socket.received++;
    await clock.advance(100);
    expect(state.checks).toBe(0);
    await clock.advance(100);
    expect(state.checks).toBe(1);
  });

  it('does not ask while the socket reconnects or a server restart is recovered from', async () => {
    const { clock, socket, state, poll } = setup();
    poll.schedule();
    socket.isReconnecting = true;
    await clock.advance(100);
    socket.isReconnecting = false;
    state.recovering = true;
    await clock.advance(100);
    expect(state.checks).toBe(0);
  });

  it('stops when the kernel is gone, when no cell is in flight, and on stop()', async () => {
    const { clock, state, poll } = setup();
    poll.schedule();
    state.gone = true;
    await clock.advance(100);
    expect(poll.armed).toBe(false);
    state.gone = false;
    poll.schedule();
    state.busy = false;
    await clock.advance(100);
    expect(poll.armed).toBe(false);
    state.busy = true;
    poll.schedule();
    poll.stop();
    expect(clock.pendingTimers()).toBe(0);
  });

  it('never arms with 0', () => {
    const { clock, poll } = setup(0);
    poll.schedule();
    expect(clock.pendingTimers()).toBe(0);
  });
});

describe('probeKernel', () => {
  const client = (answer: () => Promise<unknown>) => ({ getKernel: answer }) as unknown as GatewayClient;

  it('tells alive, dead, gone and unknown apart', async () => {
    expect(
      await probeKernel(
        client(async () => ({ id: 'k', name: 'p' })),
        'k',
        1,
      ),
    ).toBe('alive');
    expect(
      await probeKernel(
        client(async () => ({ id: 'k', execution_state: 'dead' })),
        'k',
        1,
      ),
    ).toBe('dead');
    expect(
      await probeKernel(
        client(async () => undefined),
        'k',
        1,
      ),
    ).toBe('gone');
    expect(
      await probeKernel(
        client(() => Promise.reject(new Error('ECONNREFUSED'))),
        'k',
        1,
      ),
    ).toBe('unknown');
  });
});
