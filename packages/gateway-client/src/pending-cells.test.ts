import { createMessage, type JupyterMessage } from '@kernelwarden/jupyter-protocol';
import { describe, expect, it } from 'vitest';
import { testCells } from './cells.test-fixture.js';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function setup(graces: { idleGraceMs?: number; replyGraceMs?: number } = {}) {
  const socket = { count: 0, open: true };
  let graceSettled = 0;
  const { clock, sequence, cells, add } = testCells({
    idleGraceMs: graces.idleGraceMs ?? 100,
    replyGraceMs: graces.replyGraceMs ?? 100,
    socket: { received: () => socket.count, listening: () => socket.open },
    onGraceSettled: () => graceSettled++,
  });
  return {
    clock,
    socket,
    sequence,
    cells,
    add: (msgId: string) => add(msgId, `cell-${msgId}`),
    graceSettled: () => graceSettled,
  };
}

const child = (type: string, content: Record<string, unknown>, channel: 'iopub' | 'shell' = 'iopub', id?: string) => {
  const msg = createMessage(channel, type, 'kernel', content);
  if (id) msg.header.msg_id = id;
  return msg;
};
const idle = () => child('status', { execution_state: 'idle' });
const reply = (status = 'ok') => child('execute_reply', { status }, 'shell');

describe('PendingCells', () => {
  it('keeps cells in send order; the oldest is the one running; a cell leaves when it settles', async () => {
    const { cells, add } = setup();
    const a = add('a');
    const b = add('b');
    expect(cells.running).toBe(a);
    expect([...cells.values()]).toEqual([a, b]);
    cells.reply(reply(), 'a');
    cells.iopub(idle(), 'a');
    await a.result;
    expect(cells.running).toBe(b);
    expect(cells.size).toBe(1);
    expect(cells.owns('a')).toBe(false);
    expect(cells.owns('b')).toBe(true);
  });

  it('completes a cell on reply and idle in either order, and hands other messages nowhere else', async () => {
    const { cells, add } = setup();
    const a = add('a');
    cells.iopub(child('stream', { name: 'stdout', text: 'x' }), 'a');
    cells.iopub(child('stream', { name: 'stdout', text: 'other' }), 'not-ours');
    cells.iopub(idle(), 'a');
    cells.reply(reply(), 'a');
    expect(await a.result).toMatchObject({ status: 'ok', stdout: 'x', cellId: 'cell-a' });
  });

  it('completes a cell whose idle was lost once the socket stayed silent for idleGraceMs, as outputDropped', async () => {
    const { cells, add, clock, socket, graceSettled } = setup();
    const a = add('a');
    cells.reply(reply(), 'a');
    await clock.advance(50);
    socket.count++;
    await clock.advance(100);
    await nextTurn();
    expect(a.settled).toBe(false);
    await clock.advance(100);
    await nextTurn();
    expect(await a.result).toMatchObject({ status: 'ok', outputDropped: true });
    expect(graceSettled()).toBe(1);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('settles a cell whose reply never came after its idle as a KernelProtocolError after replyGraceMs', async () => {
    const { cells, add, clock } = setup();
    const a = add('a');
    cells.iopub(child('status', { execution_state: 'busy' }), 'a');
    cells.iopub(idle(), 'a');
    await clock.advance(100);
    await nextTurn();
    expect((await a.result).error?.ename).toBe('KernelProtocolError');
  });

  it('waits for ever with graces of 0', async () => {
    const { cells, add, clock } = setup({ idleGraceMs: 0, replyGraceMs: 0 });
    const a = add('a');
    const b = add('b');
    cells.reply(reply(), 'a');
    cells.iopub(idle(), 'b');
    await clock.advance(60_000);
    expect([a.settled, b.settled]).toEqual([false, false]);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('says output was dropped for a cell that crossed a reconnect with a hole in the kernel numbers', async () => {
    const { cells, add, sequence } = setup();
    sequence.observe('k_1_1');
    const a = add('a');
    cells.markCrossedReconnect();
    sequence.observe('k_1_3');
    const done: JupyterMessage[] = [reply(), idle()];
    cells.reply(done[0]!, 'a');
    cells.iopub(done[1]!, 'a');
    expect((await a.result).outputDropped).toBe(true);
  });

  it('settles a cell healed by the journal whose reply went with the socket from its iopub, unflagged', async () => {
    const { cells, add, clock } = setup();
    const a = add('a');
    const b = add('b');
    cells.markCrossedReconnect();
    cells.clearCrossedReconnect();
    cells.probeSent('probe');
    cells.iopub(child('error', { ename: 'ValueError', evalue: 'no', traceback: [] }), 'a');
    cells.iopub(idle(), 'a');
    cells.probeReplied('probe');
    await clock.advance(100);
    await nextTurn();
    const settled = await a.result;
    expect(settled.status).toBe('error');
    expect(settled.error?.ename).toBe('ValueError');
    expect(settled.outputDropped).toBeUndefined();
    // Still running at the probe's grace: it settles at its idle, from its iopub.
    expect(b.settled).toBe(false);
    cells.iopub(child('stream', { name: 'stdout', text: 'x\n' }), 'b');
    cells.iopub(idle(), 'b');
    await clock.advance(100);
    await nextTurn();
    expect(await b.result).toMatchObject({ status: 'ok', stdout: 'x\n' });
    expect((await b.result).outputDropped).toBeUndefined();
  });

  it('settles a healed cell of which nothing came after the probe was answered (its request went with the socket)', async () => {
    const { cells, add, clock } = setup();
    const a = add('a');
    cells.markCrossedReconnect();
    cells.clearCrossedReconnect();
    cells.probeSent('probe');
    cells.probeReplied('probe');
    await clock.advance(100);
    await nextTurn();
    // One more grace: its iopub may still be on the way.
    expect(a.settled).toBe(false);
    await clock.advance(100);
    await nextTurn();
    const settled = await a.result;
    expect(settled.status).toBe('error');
    expect(settled.error?.ename).toBe('KernelProtocolError');
    expect(settled.error?.evalue).toMatch(/^its execute_request was lost across a reconnect/);
    expect(settled.outputDropped).toBe(true);
  });

  it('settles a cell not healed whose reply went with the socket as a protocol error', async () => {
    const { cells, add, clock } = setup();
    const a = add('a');
    cells.markCrossedReconnect();
    cells.probeSent('probe');
    cells.iopub(idle(), 'a');
    cells.probeReplied('probe');
    await clock.advance(100);
    await nextTurn();
    const settled = await a.result;
    expect(settled.status).toBe('error');
    expect(settled.error?.ename).toBe('KernelProtocolError');
  });

  it('counts an orphan done once both its reply and idle came, or when released', () => {
    const { cells, add } = setup();
    const a = add('a');
    a.abort({ cancelled: true });
    let done = 0;
    const forget = cells.adoptOrphan(a, () => done++);
    expect(cells.owns('a')).toBe(true);
    cells.reply(reply('error'), 'a');
    expect(done).toBe(0);
    cells.iopub(idle(), 'a');
    expect(done).toBe(1);
    forget();
    expect(cells.owns('a')).toBe(false);
    const b = add('b');
    b.abort({ cancelled: true });
    cells.adoptOrphan(b, () => done++);
    cells.releaseOrphans();
    expect(done).toBe(2);
  });

  it('aborts or fails every cell in flight and releases the orphans', async () => {
    const { cells, add } = setup();
    const a = add('a');
    const b = add('b');
    let released = false;
    const orphan = add('o');
    orphan.abort({ cancelled: true });
    cells.adoptOrphan(orphan, () => (released = true));
    cells.abortAll({ cancelled: true });
    expect(await a.result).toMatchObject({ status: 'aborted', cancelled: true });
    expect(released).toBe(true);
    expect(cells.size).toBe(0);
    const c = add('c');
    cells.failAll(new Error('died'));
    await expect(c.result).rejects.toThrow('died');
    expect(b.settled).toBe(true);
  });
});
