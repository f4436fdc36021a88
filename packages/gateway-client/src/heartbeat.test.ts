import { ManualClock } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { Heartbeat, type HeartbeatSocket } from './heartbeat.js';

function setup(opts: { silentMs?: number; canPing?: boolean } = {}) {
  const clock = new ManualClock();
  const log: string[] = [];
  const socket: HeartbeatSocket & { lastHeardAt: number; pingSentAt: number | undefined; isOpen: boolean } = {
    canPing: opts.canPing ?? true,
    isOpen: true,
    lastHeardAt: 0,
    pingSentAt: undefined,
    ping() {
      socket.pingSentAt = clock.now();
      log.push(`ping@${clock.now()}`);
    },
    dropHung(cause) {
      socket.isOpen = false;
      log.push(`drop@${clock.now()}: ${cause.message}`);
    },
  };
  const state = { busy: true };
  const heartbeat = new Heartbeat({ clock, silentMs: opts.silentMs ?? 100, socket, busy: () => state.busy });
  const hear = () => {
    socket.lastHeardAt = clock.now();
    socket.pingSentAt = undefined;
  };
  return { clock, log, socket, state, heartbeat, hear };
}

describe('Heartbeat', () => {
  it('pings a socket silent for silentMs, counted from when the cells started, and drops it when the ping goes unanswered', async () => {
    const { clock, log, heartbeat } = setup();
    await clock.advance(5000); // silence before the cells started is not theirs
    heartbeat.schedule();
    await clock.advance(99);
    expect(log).toEqual([]);
    await clock.advance(1);
    expect(log).toEqual(['ping@5100']);
    await clock.advance(100);
    expect(log).toEqual(['ping@5100', 'drop@5200: the channels WebSocket answered no ping for 100 ms']);
  });

  it('leaves a socket alone while messages keep arriving, and a ping that is answered', async () => {
    const { clock, log, heartbeat, hear } = setup();
    heartbeat.schedule();
    for (let i = 0; i < 10; i++) {
      await clock.advance(60);
      hear();
    }
    expect(log).toEqual([]);
    await clock.advance(100);
    expect(log).toEqual(['ping@700']);
    hear(); // the pong
    await clock.advance(150);
    expect(log).toEqual(['ping@700', 'ping@800']);
  });

  it('waits while the socket is not open (a reconnect), then counts silence again', async () => {
    const { clock, log, heartbeat, socket, hear } = setup();
    socket.isOpen = false;
    heartbeat.schedule();
    await clock.advance(500);
    expect(log).toEqual([]);
    socket.isOpen = true;
    hear(); // a reopened socket counts as heard
    await clock.advance(150);
    expect(log).toEqual(['ping@600']);
  });

  it('stops once no cell is in flight, and on stop()', async () => {
    const { clock, log, heartbeat, state } = setup();
    heartbeat.schedule();
    state.busy = false;
    await clock.advance(1000);
    expect(log).toEqual([]);
    expect(heartbeat.armed).toBe(false);
    state.busy = true;
    heartbeat.schedule();
    heartbeat.stop();
    expect(clock.pendingTimers()).toBe(0);
  });

  it('never arms when turned off (0) or when the socket cannot ping', () => {
    for (const opts of [{ silentMs: 0 }, { canPing: false }]) {
      const { clock, heartbeat } = setup(opts);
      heartbeat.schedule();
      expect(heartbeat.armed).toBe(false);
      expect(clock.pendingTimers()).toBe(0);
    }
  });
});
