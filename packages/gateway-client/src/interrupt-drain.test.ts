import { createMessage } from '@kernelwarden/jupyter-protocol';
import { describe, expect, it } from 'vitest';
import { testCells } from './cells.test-fixture.js';
import { InterruptDrain } from './interrupt-drain.js';
import { SendGate } from './send-gate.js';

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

function setup() {
  const { clock, cells, add } = testCells();
  const gate = new SendGate();
  const state = { alive: true, interrupts: 0 };
  const drain = new InterruptDrain({
    clock,
    drainMs: 3000,
    cells,
    gate,
    alive: () => state.alive,
    interrupt: () => state.interrupts++,
  });
  return { clock, cells, gate, state, drain, add };
}

describe('InterruptDrain', () => {
  it('settles the running cell as cancelled, interrupts, and holds requests until its reply and idle drained', async () => {
    const { cells, gate, state, drain, add, clock } = setup();
    const running = add('a');
    drain.cancel(running, { timedOut: true, interrupt: true });
    expect(await running.result).toMatchObject({ status: 'aborted', cancelled: true, timedOut: true });
    expect(state.interrupts).toBe(1);
    let sent = false;
    gate.whenOpen(() => (sent = true));
    cells.reply(createMessage('shell', 'execute_reply', 'k', { status: 'error' }), 'a');
    await flush();
    expect(sent).toBe(false);
    cells.iopub(createMessage('iopub', 'status', 'k', { execution_state: 'idle' }), 'a');
    await flush();
    expect(sent).toBe(true);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('holds requests at most drainMs when the reply never comes', async () => {
    const { gate, drain, add, clock } = setup();
    drain.cancel(add('a'), { timedOut: false, interrupt: true });
    let sent = false;
    gate.whenOpen(() => (sent = true));
    await clock.advance(2999);
    expect(sent).toBe(false);
    await clock.advance(1);
    await flush();
    expect(sent).toBe(true);
  });

  it('does not interrupt for a cell still queued behind another, nor when told not to, nor on a dead kernel', async () => {
    const { state, drain, add, gate } = setup();
    add('running');
    const queued = add('queued');
    drain.cancel(queued, { timedOut: false, interrupt: true });
    expect((await queued.result).cancelled).toBe(true);
    const own = setup();
    own.drain.cancel(own.add('x'), { timedOut: false, interrupt: false });
    const dead = setup();
    dead.state.alive = false;
    dead.drain.cancel(dead.add('y'), { timedOut: false, interrupt: true });
    expect([state.interrupts, own.state.interrupts, dead.state.interrupts]).toEqual([0, 0, 0]);
    expect([gate.held, own.gate.held, dead.gate.held]).toEqual([false, false, false]);
  });
});
