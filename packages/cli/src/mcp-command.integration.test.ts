import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LocalGateway } from '@kernelwarden/local-gateway';
import { testGateway } from '@kernelwarden/test-env';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayKernelIds, leftoverKernelCgroups } from './cli-binary.test-fixture.js';

const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../dist/bin.cjs');

let stateDir: string;
let workDir: string;

function serverEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value;
  delete env.KERNELWARDEN_CELL_TIMEOUT;
  delete env.KERNELWARDEN_GATEWAY_TOKEN;
  env.KERNELWARDEN_STATE_DIR = stateDir;
  return env;
}

/** `kernelwarden mcp` as a child process, driven by the SDK's own client over its stdio transport. */
async function connect(
  args: string[] = [],
): Promise<{ client: Client; transport: StdioClientTransport; stderr: () => string }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp', ...args],
    cwd: workDir,
    env: serverEnv(),
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const client = new Client({ name: 'kernelwarden-test', version: '0.0.0' });
  await client.connect(transport);
  return { client, transport, stderr: () => stderr };
}

function textOf(result: CallToolResult): string {
  return result.content
    .filter((item) => item.type === 'text')
    .map((item) => (item as { text: string }).text)
    .join('\n');
}

async function runCode(
  client: Client,
  args: { code: string; language?: 'python' | 'r'; timeout_seconds?: number },
  opts: Parameters<Client['callTool']>[2] = {},
): Promise<CallToolResult> {
  return (await client.callTool({ name: 'run_code', arguments: args }, undefined, {
    timeout: 120_000,
    ...opts,
  })) as CallToolResult;
}

/** Starts `code` with start_background and waits for it: the check_background result. */
async function background(client: Client, code: string): Promise<CallToolResult> {
  const started = (await client.callTool({ name: 'start_background', arguments: { code } })) as CallToolResult;
  const execId = /exec-[0-9a-f]+/.exec(textOf(started))?.[0];
  expect(execId, textOf(started)).toBeDefined();
  return (await client.callTool(
    { name: 'check_background', arguments: { exec_id: execId, wait_seconds: 60 } },
    undefined,
    { timeout: 90_000 },
  )) as CallToolResult;
}

/** Resolves once process `pid` is gone. */
function exitOf(pid: number): Promise<void> {
  return new Promise((resolveExit) => {
    const check = setInterval(() => {
      try {
        process.kill(pid, 0);
      } catch {
        clearInterval(check);
        resolveExit();
      }
    }, 50);
  });
}

beforeAll(() => {
  const root = testGateway().root;
  const id = randomBytes(4).toString('hex');
  stateDir = join(root, `mcp-state-${id}`);
  workDir = join(root, `mcp-work-${id}`);
  mkdirSync(stateDir, { recursive: true });
  mkdirSync(workDir, { recursive: true });
});

afterAll(async () => {
  // The embedded gateway outlives the server by its linger: stop it so no server or kernel survives the suite.
  await LocalGateway.stop({ stateDir });
});

describe('kernelwarden mcp (the built binary over stdio, embedded gateway)', () => {
  let server: Awaited<ReturnType<typeof connect>>;
  beforeAll(async () => {
    server = await connect(['--interrupt-grace', '1s', '--kill-grace', '5s']);
  });
  afterAll(async () => {
    await server?.client.close();
  });

  it('lists run_code with its input schema, the restart and background tools, and the notebook tools', async () => {
    const { tools } = await server.client.listTools();
    const names = tools.map((t) => t.name).sort();
    expect(names).toEqual([
      'cancel_cell',
      'check_background',
      'restart_kernel',
      'run_code',
      'run_notebook',
      'save_notebook',
      'start_background',
    ]);
    const runCodeTool = tools.find((t) => t.name === 'run_code')!;
    expect(Object.keys(runCodeTool.inputSchema.properties ?? {}).sort()).toEqual([
      'code',
      'language',
      'max_wait_seconds',
      'timeout_seconds',
    ]);
    expect(runCodeTool.inputSchema.required).toEqual(['code']);
  });

  it('keeps Python state across calls and returns the last expression as text', async () => {
    const first = await runCode(server.client, { code: 'x = 40\nprint("set")' });
    expect(first.isError).toBeFalsy();
    expect(textOf(first)).toContain('set');
    const second = await runCode(server.client, { code: 'x + 2' });
    expect(second.isError).toBeFalsy();
    expect(textOf(second)).toContain('42');
  });

  it('runs a notebook given relative to the working directory with run_notebook, in the kernel run_code uses', async () => {
    const cell = (source: string, tags: string[] = []) => ({
      cell_type: 'code',
      metadata: tags.length > 0 ? { tags } : {},
      source,
      execution_count: null,
      outputs: [],
    });
    const nb = {
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {},
      cells: [cell('n = 1', ['parameters']), cell('print(n * 7)')],
    };
    writeFileSync(join(workDir, 'mcp-nb.ipynb'), JSON.stringify(nb));
    const ran = (await server.client.callTool(
      { name: 'run_notebook', arguments: { path: 'mcp-nb.ipynb', parameters: { n: 6 } } },
      undefined,
      { timeout: 60_000 },
    )) as CallToolResult;
    expect(ran.isError, textOf(ran)).toBe(false);
    expect(textOf(ran)).toContain(join(workDir, 'mcp-nb.out.ipynb'));
    const written = JSON.parse(readFileSync(join(workDir, 'mcp-nb.out.ipynb'), 'utf8')) as {
      cells: { outputs?: { text?: string[] }[] }[];
    };
    expect(written.cells[2]?.outputs?.[0]?.text).toEqual(['42\n']);
    expect(textOf(await runCode(server.client, { code: 'n' }))).toContain('6');
  });

  it('returns a traceback without colour codes as isError', async () => {
    const result = await runCode(server.client, { code: 'def f():\n    return 1 / 0\nf()' });
    expect(result.isError).toBe(true);
    const text = textOf(result);
    expect(text).toContain('ZeroDivisionError');
    expect(text).toContain('division by zero');
    expect(text).toContain('return 1 / 0');
    expect(text).not.toContain('\x1b[');
  });

  it('keeps R state across calls, and an R plot arrives as PNG image content', async () => {
    const set = await runCode(server.client, { code: 'y <- 21', language: 'r' });
    expect(set.isError, textOf(set)).toBeFalsy();
    const got = await runCode(server.client, { code: 'cat(y * 2)', language: 'r' });
    expect(textOf(got)).toContain('42');
    const plot = await runCode(server.client, { code: 'plot(1:10)', language: 'r' });
    expect(plot.isError, textOf(plot)).toBeFalsy();
    const images = plot.content.filter((item) => item.type === 'image');
    expect(images).toHaveLength(1);
    const image = images[0] as { data: string; mimeType: string };
    expect(image.mimeType).toBe('image/png');
    expect(Buffer.from(image.data, 'base64').subarray(1, 4).toString('latin1')).toBe('PNG');
  });

  it('caps a 200,000-line output to its head and tail with a line saying what was cut', async () => {
    const result = await runCode(server.client, {
      code: "print('\\n'.join(f'line {i}' for i in range(200000)))",
    });
    expect(result.isError).toBeFalsy();
    const text = textOf(result);
    expect(text.length).toBeLessThan(32_000 + 500);
    expect(text).toMatch(/^line 0\nline 1\n/);
    expect(text).toContain('line 199999');
    expect(text).toMatch(/characters \([\d,]+ lines\) cut from the middle/);
  });

  it('answers a SIGINT-ignoring cell with timeout_seconds 2 within the ladder, says the kernel was restarted, and the next call works', async () => {
    await runCode(server.client, { code: 'kept = 1' });
    const started = performance.now();
    const result = await runCode(server.client, {
      code: [
        'import signal, time',
        'signal.signal(signal.SIGINT, signal.SIG_IGN)',
        'while True:',
        '    time.sleep(0.05)',
      ].join('\n'),
      timeout_seconds: 2,
    });
    // 2 s budget + 1 s interrupt grace + 5 s kill grace + a kernel restart.
    expect(performance.now() - started).toBeLessThan(2_000 + 1_000 + 5_000 + 8_000);
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/kernel was restarted/);
    expect(textOf(result)).toMatch(/variables .* gone/);
    const next = await runCode(server.client, { code: "print('kept' in globals())" });
    expect(next.isError).toBeFalsy();
    expect(textOf(next)).toContain('False');
  });

  it('interrupts the kernel when the client cancels, and the next call answers within 5 s with the variables kept', async () => {
    await runCode(server.client, { code: 'survivor = 7' });
    const controller = new AbortController();
    const cancelled = runCode(
      server.client,
      { code: 'import time\nprint("sleeping", flush=True)\ntime.sleep(60)' },
      { signal: controller.signal, onprogress: () => controller.abort(new Error('the user cancelled')) },
    );
    await expect(cancelled).rejects.toThrow();
    const started = performance.now();
    const next = await runCode(server.client, { code: 'survivor * 6' });
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(next.isError).toBeFalsy();
    expect(textOf(next)).toContain('42');
  });

  it('sends progress notifications while a cell prints for 3 s', async () => {
    const progress: { progress: number; message?: string }[] = [];
    const result = await runCode(
      server.client,
      { code: 'import time\nfor i in range(6):\n    print("tick", i, flush=True)\n    time.sleep(0.5)' },
      { onprogress: (p) => progress.push(p) },
    );
    expect(result.isError).toBeFalsy();
    expect(progress.length).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < progress.length; i++) expect(progress[i]!.progress).toBeGreaterThan(progress[i - 1]!.progress);
    expect(progress.map((p) => p.message).join('')).toContain('tick 0');
  });

  it('restarts a kernel on request, and the next cell sees no old variables', async () => {
    await runCode(server.client, { code: 'gone_soon = 1' });
    const restarted = (await server.client.callTool({
      name: 'restart_kernel',
      arguments: { language: 'python' },
    })) as CallToolResult;
    expect(restarted.isError).toBeFalsy();
    expect(textOf(restarted)).toMatch(/restarted/);
    const after = await runCode(server.client, { code: "print('gone_soon' in globals())" });
    expect(textOf(after)).toContain('False');
  });

  it('runs a background cell and reports its status and output', async () => {
    const checked = await background(server.client, 'print("from the background")');
    expect(checked.isError).toBeFalsy();
    expect(textOf(checked)).toContain('from the background');
    expect(textOf(checked)).toMatch(/finished/);
  });
});

describe('kernelwarden mcp lifecycle', () => {
  it('exits on its own when the client closes stdin, with every kernel shut down and the gateway lease released', async () => {
    const server = await connect();
    const pid = server.transport.pid!;
    const ran = await runCode(server.client, { code: 'print(1)' });
    expect(textOf(ran)).toContain('1');
    const exited = exitOf(pid);
    await server.client.close();
    await exited;
    expect(server.stderr()).toMatch(/stdin closed: shutting the kernels down/);
    const status = await LocalGateway.status({ stateDir });
    expect(status.holders.filter((h) => h.pid === pid)).toEqual([]);
    expect(status.kernels.filter((k) => k.ownerPid === pid)).toEqual([]);
  });

  it('on SIGTERM shuts the kernels down and exits 0, with nothing but protocol messages on stdout', async () => {
    const child = spawn(process.execPath, [BIN, 'mcp'], { cwd: workDir, env: serverEnv() });
    let stdout = '';
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const replies = new Map<number, (message: { result?: CallToolResult }) => void>();
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      for (const line of chunk.split('\n')) {
        if (!line.trim()) continue;
        const message = JSON.parse(line) as { id?: number; result?: CallToolResult };
        if (message.id !== undefined) replies.get(message.id)?.(message);
      }
    });
    const exited = new Promise<number | null>((resolveExit) => child.on('close', (code) => resolveExit(code)));
    const request = (id: number, method: string, params: unknown) =>
      new Promise<{ result?: CallToolResult }>((resolveReply) => {
        replies.set(id, resolveReply);
        child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
      });
    await request(1, 'initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'raw', version: '0' },
    });
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
    const ran = await request(2, 'tools/call', { name: 'run_code', arguments: { code: 'print(6 * 7)' } });
    expect(textOf(ran.result!)).toContain('42');
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stderr).toMatch(/SIGTERM received: shutting the kernels down/);
    for (const line of stdout.split('\n').filter((l) => l.trim()))
      expect(JSON.parse(line)).toHaveProperty('jsonrpc', '2.0');
    const status = await LocalGateway.status({ stateDir });
    expect(status.kernels.filter((k) => k.ownerPid === child.pid)).toEqual([]);
    expect(status.holders.filter((h) => h.pid === child.pid)).toEqual([]);
  });
});

describe('kernelwarden mcp --no-network --memory', () => {
  it('holds every kernel it starts to the limits: run_code and background cells alike, with nothing left after', async () => {
    let accepted = 0;
    const listener = createServer((socket) => {
      accepted++;
      socket.end();
    });
    await new Promise<void>((resolveListen) => listener.listen(0, '127.0.0.1', resolveListen));
    const port = (listener.address() as { port: number }).port;
    const probe = [
      'import resource, socket',
      'try:',
      `    socket.create_connection(('127.0.0.1', ${port}), timeout=10).close()`,
      "    net = 'connected'",
      'except OSError as e:',
      "    net = 'refused'",
      "print('limits', net, resource.getrlimit(resource.RLIMIT_DATA))",
    ].join('\n');
    const server = await connect(['--no-network', '--memory', '512M']);
    const pid = server.transport.pid!;
    try {
      const limit = `(${512 * 1024 * 1024}, ${512 * 1024 * 1024})`;
      const big = await runCode(server.client, { code: 'b = bytearray(2 * 1024**3)' });
      expect(big.isError).toBe(true);
      expect(textOf(big)).toContain('MemoryError');
      const main = await runCode(server.client, { code: probe });
      expect(main.isError, textOf(main)).toBeFalsy();
      expect(textOf(main)).toContain(`limits refused ${limit}`);

      const checked = await background(server.client, probe);
      expect(textOf(checked)).toMatch(/finished/);
      expect(textOf(checked)).toContain(`limits refused ${limit}`);
      expect(accepted).toBe(0);
    } finally {
      const exited = exitOf(pid);
      await server.client.close();
      await exited;
      await new Promise((resolveClose) => listener.close(resolveClose));
    }
    // The server removed its kernelspecs when it ended, and with them its kernels' cgroups.
    expect(gatewayKernelIds(stateDir).length).toBeGreaterThan(0);
    expect(leftoverKernelCgroups(stateDir)).toEqual([]);
  });
});

describe('kernelwarden mcp --max-source-size 1M (hostile input over stdio)', () => {
  it('refuses a 3 MB cell naming the limit and a NUL at once, answers a 12 MiB request with an error, and the session goes on', async () => {
    const server = await connect(['--max-source-size', '1M']);
    const pid = server.transport.pid!;
    try {
      expect((await runCode(server.client, { code: 'kept = 42' })).isError).toBeFalsy();
      const big = await runCode(server.client, { code: `kept = 0\n# ${'y'.repeat(3_000_000)}` });
      expect(big.isError).toBe(true);
      expect(textOf(big)).toMatch(/larger than this server's source limit of 1 MiB/);
      const nul = await runCode(server.client, { code: 'kept = 0\0' });
      expect(nul.isError).toBe(true);
      expect(textOf(nul)).toContain('NUL character (line 1)');
      await expect(runCode(server.client, { code: 'y'.repeat(12 * 1024 * 1024) })).rejects.toThrow(
        /larger than this server's limit of 10 MiB .* for one message/,
      );
      const after = await runCode(server.client, { code: 'print(kept)' });
      expect(after.isError, textOf(after)).toBeFalsy();
      expect(textOf(after)).toContain('42');
    } finally {
      const exited = exitOf(pid);
      await server.client.close();
      await exited;
    }
  });
});
