import { ManualClock } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { FLOOD_AFTER_MESSAGES, PongPolicy, QUIET_PONG_MS } from './pong-policy.js';

function setup(opts: { enabled?: boolean; canPong?: boolean } = {}) {
  const clock = new ManualClock();
  const socket = { canPong: opts.canPong ?? true, pongs: 0, pong: () => socket.pongs++ };
  const demand = { handshaking: false, cells: [] as { messages: number; replied: boolean }[] };
  const policy = new PongPolicy({
    enabled: opts.enabled ?? true,
    clock,
    socket,
    demand: { handshaking: () => demand.handshaking, cells: () => demand.cells },
  });
  return { clock, socket, demand, policy };
}

const microtasks = () => new Promise<void>((resolve) => queueMicrotask(resolve));

describe('PongPolicy', () => {
  it('acknowledges nothing while no request is pending', async () => {
    const { policy, socket } = setup();
    expect(policy.mode()).toBe(false);
    policy.received();
    await microtasks();
    expect(socket.pongs).toBe(0);
  });

  it('answers at once during a handshake and for a short cell, one pong per read', async () => {
    const { policy, socket, demand } = setup();
    demand.handshaking = true;
    expect(policy.mode()).toBe('now');
    demand.handshaking = false;
    demand.cells = [{ messages: 3, replied: false }];
    // Three messages in one read share one pong.
    policy.received();
    policy.received();
    policy.received();
    await microtasks();
    expect(socket.pongs).toBe(1);
    policy.received();
    await microtasks();
    expect(socket.pongs).toBe(2);
  });

  it(`treats a cell past ${FLOOD_AFTER_MESSAGES} messages as a flood: silent until its reply, then a pong per pause`, async () => {
    const { policy, socket, demand, clock } = setup();
    demand.cells = [{ messages: FLOOD_AFTER_MESSAGES, replied: false }];
    expect(policy.mode()).toBe(false);
    policy.received();
    await microtasks();
    await clock.advance(100);
    expect(socket.pongs).toBe(0);

    demand.cells = [{ messages: FLOOD_AFTER_MESSAGES + 10, replied: true }];
    expect(policy.mode()).toBe('quiet');
    policy.received();
    await clock.advance(QUIET_PONG_MS - 1);
    policy.received(); // the flood still flows: the pause starts again
    await clock.advance(QUIET_PONG_MS - 1);
    expect(socket.pongs).toBe(0);
    await clock.advance(1);
    expect(socket.pongs).toBe(1);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('lets any short cell in flight win over a flood', () => {
    const { policy, demand } = setup();
    demand.cells = [
      { messages: 500, replied: true },
      { messages: 1, replied: false },
    ];
    expect(policy.mode()).toBe('now');
  });

  it('sends nothing when turned off or when the socket cannot pong', async () => {
    for (const opts of [{ enabled: false }, { canPong: false }]) {
      const { policy, socket, demand, clock } = setup(opts);
      demand.cells = [{ messages: 1, replied: false }];
      policy.received();
      await microtasks();
      demand.cells = [{ messages: 100, replied: true }];
      policy.received();
      await clock.advance(10);
      expect(socket.pongs).toBe(0);
      expect(clock.pendingTimers()).toBe(0);
    }
  });

  it('cancels a pending quiet pong on stop()', async () => {
    const { policy, socket, demand, clock } = setup();
    demand.cells = [{ messages: 100, replied: true }];
    policy.received();
    policy.stop();
    await clock.advance(10);
    expect(socket.pongs).toBe(0);
    expect(clock.pendingTimers()).toBe(0);
  });
});
