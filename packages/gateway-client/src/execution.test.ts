import { createMessage } from '@kernelwarden/jupyter-protocol';
import { describe, expect, it } from 'vitest';
import { testCell } from './cells.test-fixture.js';
import { MISSING_REPLY_ENAME } from './execution.js';

const cell = (extra: { onDropped?: () => void; onInput?: () => string } = {}) =>
  testCell('m', {
    cellId: 'c',
    opts: extra.onInput ? { onInput: extra.onInput } : {},
    ...(extra.onDropped ? { onDropped: extra.onDropped } : {}),
  });
const iopub = (type: string, content: Record<string, unknown>) => createMessage('iopub', type, 'k', content);
const reply = (content: Record<string, unknown>) => createMessage('shell', 'execute_reply', 'k', content);

describe('CellExecution', () => {
  it('is complete once both its reply and its idle arrived, in either order', () => {
    const first = cell();
    expect(first.reply(reply({ status: 'ok', execution_count: 3 }))).toBe(false);
    expect(first.iopub(iopub('status', { execution_state: 'idle' }))).toBe(true);
    const second = cell();
    expect(second.iopub(iopub('status', { execution_state: 'idle' }))).toBe(false);
    expect(second.reply(reply({ status: 'ok' }))).toBe(true);
    expect(second.messages).toBe(2);
  });

  it('resolves with the kernel verdict, the execution count, the first error and the output', async () => {
    const c = cell();
    c.iopub(iopub('stream', { name: 'stdout', text: 'hi\n' }));
    c.iopub(iopub('error', { ename: 'ValueError', evalue: 'bad', traceback: ['tb'] }));
    c.reply(reply({ status: 'error', execution_count: 7, ename: 'Other', evalue: 'x', traceback: [] }));
    c.complete();
    const result = await c.result;
    expect(result).toMatchObject({ status: 'error', cellId: 'c', executionCount: 7, stdout: 'hi\n' });
    expect(result.error).toEqual({ ename: 'ValueError', evalue: 'bad', traceback: ['tb'] });
    expect(result.outputs.map((o) => o.type)).toEqual(['stream', 'error']);
  });

  it("maps IRkernel's 'abort' reply to status 'aborted'", async () => {
    const c = cell();
    c.reply(reply({ status: 'abort' }));
    c.complete();
    expect((await c.result).status).toBe('aborted');
  });

  it('settles once: abort keeps the output so far and later settles do nothing', async () => {
    const c = cell();
    c.iopub(iopub('stream', { name: 'stdout', text: 'so far\n' }));
    c.abort({ cancelled: true, timedOut: true });
    c.complete();
    c.fail(new Error('late'));
    expect(c.settled).toBe(true);
    expect(await c.result).toMatchObject({ status: 'aborted', cancelled: true, timedOut: true, stdout: 'so far\n' });
  });

  it('runs each settle cleanup once, also one registered after it settled', async () => {
    const c = cell();
    const ran: string[] = [];
    c.onSettled(() => ran.push('before'));
    c.fail(new Error('gone'));
    c.onSettled(() => ran.push('after'));
    c.fail(new Error('again'));
    await expect(c.result).rejects.toThrow('gone');
    expect(ran).toEqual(['before', 'after']);
  });

  it('settles a cell whose kernel went idle without replying as a KernelProtocolError', async () => {
    const c = cell();
    c.iopub(iopub('status', { execution_state: 'idle' }));
    expect(c.beginReplyWait()).toBe(true);
    expect(c.beginReplyWait()).toBe(false);
    c.completeWithoutReply(3000);
    const result = await c.result;
    expect(result.status).toBe('error');
    expect(result.error).toMatchObject({ ename: MISSING_REPLY_ENAME, traceback: [] });
    expect(result.error?.evalue).toMatch(/within 3000 ms/);
  });

  it('marks dropped output once, from the server notice or from outside, and tells onDropped once', async () => {
    let told = 0;
    const c = cell({ onDropped: () => told++ });
    c.iopub(iopub('stream', { name: 'stderr', text: 'IOPub data rate exceeded.\n' }));
    c.markDropped();
    c.complete();
    expect(told).toBe(1);
    expect((await c.result).outputDropped).toBe(true);
  });

  it('records stdin requests and a crossed reconnect through its own methods', async () => {
    const c = cell({ onInput: () => 'x' });
    expect(c.onInput).toBeTypeOf('function');
    expect(c.crossedReconnect).toBe(false);
    c.markCrossedReconnect();
    c.markStdinRequested();
    c.complete();
    expect(c.crossedReconnect).toBe(true);
    expect((await c.result).stdinRequested).toBe(true);
  });
});
