import { GatewayClient, GatewayKernel } from '@kernelwarden/gateway-client';
import { createRSlot, startIRKernel } from '@kernelwarden/r-kernel';
import { KernelSession } from '@kernelwarden/supervisor';
import { testGateway } from '@kernelwarden/test-env';
import { createWatchdog } from '@kernelwarden/watchdog';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { type CallToolResult, CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { createMcpServer } from './mcp-server.js';
import { stdioPair } from './stdio-pair.test-fixture.js';
import type { KernelToolOptions } from './tool-options.js';

const textOf = (result: CallToolResult) =>
  result.content
    .filter((c) => c.type === 'text')
    .map((c) => (c as { text: string }).text)
    .join('\n');

const execIdOf = (result: CallToolResult) => (result.structuredContent as { exec_id?: string } | undefined)?.exec_id;

/**
 * A session with Python and R on the test run's jupyter-server, served on `McpStdioTransport` to the SDK's own
 * `Client` with its default request options (a 60 s timeout, not reset by progress).
 */
async function serve(options: KernelToolOptions = {}, client = new Client({ name: 'host', version: '0' })) {
  const gateway = new GatewayClient(testGateway());
  const session = new KernelSession({
    python: ({ signal }) => GatewayKernel.start({ gateway, signal }),
    r: createRSlot({ spawn: ({ signal }) => startIRKernel({ gateway, signal }) }),
    executor: createWatchdog({ cellTimeoutMs: 0, interruptGraceMs: 2_000, killGraceMs: 10_000 }),
  });
  const server = createMcpServer({ session, ...options });
  const pair = stdioPair();
  await server.connect(pair.server);
  await client.connect(pair.client);
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
  return {
    client,
    call,
    close: async () => {
      await client.close();
      await server.close();
      await session.close();
    },
  };
}

const LONG_CELL = {
  python: [
    'import time',
    'for i in range(1, 16):',
    '    print(f"line {i}", flush=True)',
    '    time.sleep(5)',
    'total = sum(range(1, 16))',
    'total * 1000',
  ].join('\n'),
  r: [
    'for (i in 1:15) {',
    '  cat(sprintf("line %d\\n", i))',
    '  flush.console()',
    '  Sys.sleep(5)',
    '}',
    'total <- sum(1:15)',
    'total * 1000',
  ].join('\n'),
};

describe('a 75 s cell through an MCP host with the 60 s default request timeout, on a real jupyter-server', () => {
  for (const language of ['python', 'r'] as const) {
    it.concurrent(`${language}: every line and the final value arrive in order, none twice, and the variables stay`, async () => {
      const mcp = await serve();
      try {
        const answers: CallToolResult[] = [await mcp.call('run_code', { code: LONG_CELL[language], language })];
        const execId = execIdOf(answers[0]!);
        expect(execId, textOf(answers[0]!)).toMatch(/^cell-/);
        expect(textOf(answers[0]!)).toContain(`The cell is still running`);
        expect(textOf(answers[0]!)).toContain(`${language === 'r' ? 'R' : 'Python'} kernel, which keeps its variables`);
        while (execIdOf(answers.at(-1)!) !== undefined) {
          expect(answers.length).toBeLessThan(6);
          answers.push(await mcp.call('check_background', { exec_id: execId, wait_seconds: 45 }));
        }
        const final = answers.at(-1)!;
        expect(final.isError, textOf(final)).toBe(false);
        expect(textOf(final)).toContain('120000');
        const all = answers.map(textOf).join('\n');
        const lines = [...all.matchAll(/^line (\d+)$/gm)].map((m) => Number(m[1]));
        expect(lines).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
        expect(all.indexOf('120000')).toBeGreaterThan(all.indexOf('line 15'));
        const next = await mcp.call('run_code', {
          code: language === 'r' ? 'cat(total)' : 'print(total)',
          language,
        });
        expect(next.isError, textOf(next)).toBe(false);
        expect(textOf(next)).toContain('120');
      } finally {
        await mcp.close();
      }
    });
  }
});

describe('run_code past a short max_wait_seconds, on a real jupyter-server', () => {
  it('queues a second cell behind a yielded one, and cancel_cell interrupts a cell with the variables kept', async () => {
    const mcp = await serve({ maxWaitMs: 3_000 });
    try {
      // The kernel's start is not part of what is measured here.
      expect((await mcp.call('run_code', { code: 'import time', max_wait_seconds: 0 })).isError).toBe(false);
      const first = await mcp.call('run_code', {
        code: 'print("a", flush=True)\ntime.sleep(6)\nkept = 41\nprint("b")',
      });
      const firstId = execIdOf(first)!;
      expect(textOf(first)).toMatch(/^a\n/);
      const second = await mcp.call('run_code', { code: 'kept + 1', max_wait_seconds: 30 });
      expect(execIdOf(second)).toBeUndefined();
      expect(textOf(second)).toBe(
        `This cell waited for ${firstId} to finish first (the session runs one cell at a time).\n\n42\n`,
      );
      const rest = await mcp.call('check_background', { exec_id: firstId, wait_seconds: 30 });
      expect(textOf(rest)).toBe('b\n');

      const sleeper = await mcp.call('run_code', { code: 'print("sleeping", flush=True)\ntime.sleep(120)' });
      const sleeperId = execIdOf(sleeper)!;
      expect(sleeperId).toMatch(/^cell-/);
      const cancelled = await mcp.call('cancel_cell', { exec_id: sleeperId });
      expect(cancelled.isError).toBe(true);
      expect(textOf(cancelled)).toContain('KeyboardInterrupt');
      expect(textOf(cancelled)).toContain('the Python kernel kept its variables');
      expect(textOf(await mcp.call('run_code', { code: 'kept' }))).toContain('41');
    } finally {
      await mcp.close();
    }
  });

  it('runs as an MCP task for a client that asks for one: the same result, and tasks/cancel interrupts', async () => {
    const client = new Client({ name: 'tasks', version: '0' }, { capabilities: { tasks: { list: {}, cancel: {} } } });
    const mcp = await serve({ maxWaitMs: 1_000 }, client);
    try {
      await client.listTools();
      const code =
        'import time\nfor i in range(3):\n    print(f"step {i}", flush=True)\n    time.sleep(1)\nstate = "kept"\n7 * 6';
      let result: CallToolResult | undefined;
      for await (const message of client.experimental.tasks.callToolStream(
        { name: 'run_code', arguments: { code } },
        CallToolResultSchema,
        { task: {} },
      )) {
        if (message.type === 'result') result = message.result as CallToolResult;
        if (message.type === 'error') throw message.error;
      }
      expect(result?.isError).toBe(false);
      expect(result?.structuredContent).toBeUndefined();
      expect(textOf(result!)).toBe('step 0\nstep 1\nstep 2\n42\n');

      let printed!: () => void;
      const longPrinted = new Promise<void>((resolve) => {
        printed = resolve;
      });
      const stream = client.experimental.tasks.callToolStream(
        { name: 'run_code', arguments: { code: 'print("long", flush=True)\ntime.sleep(120)' } },
        CallToolResultSchema,
        { task: {}, onprogress: (progress) => progress.message?.includes('long') && printed() },
      );
      const created = (await stream.next()).value;
      if (created?.type !== 'taskCreated') throw new Error(`expected taskCreated, got ${created?.type}`);
      await longPrinted;
      await client.experimental.tasks.cancelTask(created.task.taskId);
      const cancelled = (await client.experimental.tasks.getTaskResult(
        created.task.taskId,
        CallToolResultSchema,
      )) as CallToolResult;
      await stream.return(undefined);
      expect(cancelled.isError).toBe(true);
      expect(textOf(cancelled)).toContain('long');
      expect(textOf(cancelled)).toContain('the Python kernel kept its variables');
      expect(textOf(await mcp.call('run_code', { code: 'state' }))).toContain('kept');
    } finally {
      await mcp.close();
    }
  });
});
