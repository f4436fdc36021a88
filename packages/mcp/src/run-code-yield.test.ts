import type { Output } from '@kernelwarden/core';
import { KernelSession } from '@kernelwarden/supervisor';
import { Gate, ManualClock, okResult, RecordingKernel } from '@kernelwarden/testkit';
import { createWatchdog } from '@kernelwarden/watchdog';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { type CallToolResult, CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { createMcpServer } from './mcp-server.js';

const textOf = (result: CallToolResult) =>
  result.content
    .filter((c) => c.type === 'text')
    .map((c) => (c as { text: string }).text)
    .join('\n');

const line = (text: string): Output => ({ type: 'stream', name: 'stdout', text });

/** A kernel whose cell `steps` prints `one`, waits for `first`, prints `two`, waits for `second`, then ends. */
function steppingKernel() {
  const first = new Gate();
  const second = new Gate();
  const kernel = new RecordingKernel('python', {
    releaseOnInterrupt: true,
    execute: async (code, opts, k) => {
      if (code === 'steps') {
        opts.onOutput?.(line('one\n'));
        await Promise.race([first.wait(), k.executeRelease.wait()]);
        opts.onOutput?.(line('two\n'));
        await Promise.race([second.wait(), k.executeRelease.wait()]);
      } else opts.onOutput?.(line(`ran ${code}\n`));
      return okResult(opts.cellId);
    },
  });
  return { kernel, first, second };
}

async function connected(
  kernel: RecordingKernel,
  clock: ManualClock,
  client = new Client({ name: 't', version: '0' }),
) {
  const session = new KernelSession({ python: () => kernel, executor: createWatchdog({ cellTimeoutMs: 0 }) });
  const server = createMcpServer({ session, clock, progressIntervalMs: 0 });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  await client.connect(clientSide);
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
  return {
    client,
    call,
    [Symbol.asyncDispose]: async () => {
      await client.close();
      await server.close();
      await session.close();
    },
  };
}

/** Lets the promise chains of the client, the server and the session run. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

describe('run_code past max_wait_seconds', () => {
  it('answers at max_wait with the output so far and an id, then check_background gives the rest and the final result, nothing twice', async () => {
    const clock = new ManualClock();
    const { kernel, first, second } = steppingKernel();
    await using mcp = await connected(kernel, clock);
    const answer = mcp.call('run_code', { code: 'steps' });
    await kernel.executeEntered.wait();
    await settle();
    await clock.advance(45_000);
    const yielded = await answer;
    expect(yielded.isError).toBe(false);
    const id = (yielded.structuredContent as { exec_id: string }).exec_id;
    expect(id).toMatch(/^cell-[0-9a-f]{8}$/);
    expect(yielded.structuredContent).toEqual({ exec_id: id, status: 'running' });
    expect(textOf(yielded)).toMatch(/^one\n+The cell is still running \(45s so far\) in the Python kernel/);
    expect(textOf(yielded)).toContain(`check_background { "exec_id": "${id}", "wait_seconds": 45 }`);

    const nothingNew = await mcp.call('check_background', { exec_id: id });
    expect(textOf(nothingNew)).toMatch(/^The cell is still running/);
    expect(nothingNew.structuredContent).toEqual({ exec_id: id, status: 'running' });

    first.open();
    await settle();
    const waiting = mcp.call('check_background', { exec_id: id, wait_seconds: 30 });
    await settle();
    second.open();
    const final = await waiting;
    expect(final).toEqual({ content: [{ type: 'text', text: 'two\n' }], isError: false });
    expect(textOf(await mcp.call('check_background', { exec_id: id }))).toBe(
      `Cell ${id} has ended, and its result was already returned.`,
    );
  });

  it('answers with the final result when the cell ends first, and max_wait_seconds 0 waits for the end', async () => {
    const clock = new ManualClock();
    const { kernel, first, second } = steppingKernel();
    await using mcp = await connected(kernel, clock);
    const answer = mcp.call('run_code', { code: 'steps', max_wait_seconds: 0 });
    await kernel.executeEntered.wait();
    await clock.advance(3_600_000);
    first.open();
    second.open();
    expect(await answer).toEqual({ content: [{ type: 'text', text: 'one\ntwo\n' }], isError: false });
  });

  it('queues a second run_code behind a cell still running, and says so in both answers', async () => {
    const clock = new ManualClock();
    const { kernel, first, second } = steppingKernel();
    await using mcp = await connected(kernel, clock);
    const a = mcp.call('run_code', { code: 'steps', max_wait_seconds: 1 });
    await kernel.executeEntered.wait();
    await settle();
    await clock.advance(1_000);
    const idA = ((await a).structuredContent as { exec_id: string }).exec_id;
    const b = mcp.call('run_code', { code: 'after', max_wait_seconds: 1 });
    await settle();
    await clock.advance(1_000);
    const queued = await b;
    const idB = (queued.structuredContent as { exec_id: string }).exec_id;
    expect(textOf(queued)).toMatch(new RegExp(`^The cell has not started yet: it waits for ${idA} to finish`));
    first.open();
    second.open();
    const finalB = await mcp.call('check_background', { exec_id: idB, wait_seconds: 30 });
    expect(textOf(finalB)).toBe(
      `This cell waited for ${idA} to finish first (the session runs one cell at a time).\n\nran after\n`,
    );
    expect(textOf(await mcp.call('check_background', { exec_id: idA }))).toBe('two\n');
  });

  it('cancel_cell interrupts a yielded cell, and the answer says the kernel kept its variables', async () => {
    const clock = new ManualClock();
    const { kernel } = steppingKernel();
    await using mcp = await connected(kernel, clock);
    const answer = mcp.call('run_code', { code: 'steps', max_wait_seconds: 5 });
    await kernel.executeEntered.wait();
    await settle();
    await clock.advance(5_000);
    const id = ((await answer).structuredContent as { exec_id: string }).exec_id;
    const cancelled = await mcp.call('cancel_cell', { exec_id: id });
    expect(kernel.interruptCalls).toBe(1);
    expect(cancelled.isError).toBe(true);
    expect(textOf(cancelled)).toContain(
      'was cancelled by the client and was interrupted; the Python kernel kept its variables',
    );
    expect(textOf(await mcp.call('cancel_cell', { exec_id: 'cell-00000000' })).length).toBeGreaterThan(0);
  });

  it('bounds the whole cell by its timeout, across the answers', async () => {
    const clock = new ManualClock();
    const { kernel } = steppingKernel();
    await using mcp = await connected(kernel, clock);
    const answer = mcp.call('run_code', { code: 'steps', timeout_seconds: 60 });
    await kernel.executeEntered.wait();
    await settle();
    await clock.advance(45_000);
    const id = ((await answer).structuredContent as { exec_id: string }).exec_id;
    const waiting = mcp.call('check_background', { exec_id: id, wait_seconds: 45 });
    await settle();
    await clock.advance(15_000);
    const final = await waiting;
    expect(kernel.interruptCalls).toBe(1);
    expect(final.isError).toBe(true);
    expect(textOf(final)).toContain('ran past its 60s timeout and was interrupted');
  });
});

describe('run_code as an MCP task', () => {
  const taskClient = () =>
    new Client({ name: 'tasks', version: '0' }, { capabilities: { tasks: { list: {}, cancel: {} } } });

  it('runs to the end past max_wait, with the same result as a plain call, through the task methods', async () => {
    const clock = new ManualClock();
    const { kernel, first, second } = steppingKernel();
    await using mcp = await connected(kernel, clock, taskClient());
    const { tools } = await mcp.client.listTools();
    expect(tools.find((t) => t.name === 'run_code')?.execution).toEqual({ taskSupport: 'optional' });
    const stream = mcp.client.experimental.tasks.callToolStream(
      { name: 'run_code', arguments: { code: 'steps' } },
      CallToolResultSchema,
      { task: { ttl: 60_000 } },
    );
    const seen: string[] = [];
    let result: CallToolResult | undefined;
    for await (const message of stream) {
      seen.push(message.type);
      if (message.type === 'taskCreated') {
        await kernel.executeEntered.wait();
        await settle();
        await clock.advance(3_600_000);
        expect((await mcp.client.experimental.tasks.getTask(message.task.taskId)).status).toBe('working');
        first.open();
        second.open();
      }
      if (message.type === 'result') result = message.result as CallToolResult;
      if (message.type === 'error') throw message.error;
    }
    expect(seen[0]).toBe('taskCreated');
    expect({ content: result?.content, isError: result?.isError }).toEqual({
      content: [{ type: 'text', text: 'one\ntwo\n' }],
      isError: false,
    });
    expect(result?.structuredContent).toBeUndefined();
  });

  it('lists the tasks the client asked for, never the bookkeeping task of a plain call', async () => {
    const clock = new ManualClock();
    const { kernel } = steppingKernel();
    await using mcp = await connected(kernel, clock, taskClient());
    await mcp.client.listTools();
    expect(textOf(await mcp.call('run_code', { code: 'plain' }))).toBe('ran plain\n');
    const stream = mcp.client.experimental.tasks.callToolStream(
      { name: 'run_code', arguments: { code: 'asked' } },
      CallToolResultSchema,
      { task: {} },
    );
    let taskId: string | undefined;
    for await (const message of stream) if (message.type === 'taskCreated') taskId = message.task.taskId;
    const { tasks } = await mcp.client.experimental.tasks.listTasks();
    expect(tasks.map((t) => [t.taskId, t.status, t.ttl])).toEqual([[taskId, 'completed', 3_600_000]]);
  });

  it('tasks/cancel interrupts the cell, and tasks/result then says the kernel kept its variables', async () => {
    const clock = new ManualClock();
    const { kernel } = steppingKernel();
    await using mcp = await connected(kernel, clock, taskClient());
    await mcp.client.listTools();
    const stream = mcp.client.experimental.tasks.callToolStream(
      { name: 'run_code', arguments: { code: 'steps' } },
      CallToolResultSchema,
      { task: {} },
    );
    const created = (await stream.next()).value;
    if (created?.type !== 'taskCreated') throw new Error(`expected taskCreated, got ${created?.type}`);
    await kernel.executeEntered.wait();
    const taskId = created.task.taskId;
    expect((await mcp.client.experimental.tasks.cancelTask(taskId)).status).toBe('cancelled');
    await expect.poll(() => kernel.interruptCalls).toBe(1);
    const result = (await mcp.client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)) as CallToolResult;
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain(
      'was cancelled by the client and was interrupted; the Python kernel kept its variables',
    );
    await stream.return(undefined);
  });
});
