import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  collectCell,
  GatewayClient,
  GatewayKernel,
  KernelJournalUnavailableError,
  kernelJournalCapability,
} from '@kernelwarden/gateway-client';
import { testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalGateway, type LocalGatewayTicket } from './index.js';

const LINES = 'import time\nfor i in range(1000):\n    print(i, flush=True)\n    time.sleep(0.002)';
const EXPECTED = Array.from({ length: 1000 }, (_, i) => `${i}\n`).join('');
/** LINES over about 5 s: it still runs when the process that started it is gone. */
const SLOW = LINES.replace('0.002', '0.005');

/** The msg_id of the execute_request whose code is `code`, once the journal holds its execute_input. */
async function requestId(client: GatewayClient, kernelId: string, code: string): Promise<string> {
  const until = Date.now() + 30_000;
  for (;;) {
    const page = await client.kernelJournal(kernelId, {});
    const input = page?.entries.find((e) => e.msg.header.msg_type === 'execute_input' && e.msg.content.code === code);
    if (input?.msg.parent_header.msg_id) return input.msg.parent_header.msg_id;
    if (Date.now() > until) throw new Error('the journal never showed the cell');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** gateway-client's built entry, for the processes the tests start. */
const CLIENT = fileURLToPath(new URL('../../gateway-client/dist/index.js', import.meta.url));

/** Runs `source` (an ES module) in a node process of its own; resolves with what it printed on its first line. */
function runProcess(dir: string, source: string, env: Record<string, string>): Promise<string> {
  const file = join(dir, `process-${randomBytes(4).toString('hex')}.mjs`);
  writeFileSync(file, source);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => {
      const line = out.split('\n')[0] ?? '';
      if (code === 0 && line !== '') resolve(line);
      else reject(new Error(`process exited ${code}: ${err.slice(-2000)}`));
    });
  });
}

describe('collectCell: a running cell read back from the journal by its request id', () => {
  let ticket: LocalGatewayTicket;

  beforeAll(async () => {
    const stateDir = join(testGateway().root, `journal-collect-${randomBytes(4).toString('hex')}`);
    mkdirSync(stateDir, { recursive: true });
    ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool: {} });
  });
  afterAll(async () => {
    await ticket?.release();
  });

  it("gives another client the cell's whole output, in order, once it finished, and a prefix while it runs", async () => {
    await using kernel = await GatewayKernel.start({ gateway: ticket });
    const running = kernel.execute(LINES);
    // Another process: a client of its own that knows only the gateway, the kernel id and the request's msg_id.
    const other = new GatewayClient({ baseUrl: ticket.baseUrl, token: ticket.token });
    expect(kernelJournalCapability(await other.getKernel(kernel.id))).toEqual({
      version: 1,
      maxBytes: 32 * 1024 * 1024,
      maxAgeMs: 600_000,
    });
    const msgId = await requestId(other, kernel.id, LINES);
    const early = await collectCell(other, kernel.id, msgId);
    expect(EXPECTED.startsWith(early.stdout)).toBe(true);
    const whole = await collectCell(other, kernel.id, msgId, { waitMs: 60_000 });
    expect(whole.complete).toBe(true);
    expect(whole.status).toBe('ok');
    expect(whole.stdout).toBe(EXPECTED);
    expect(whole.outputDropped).toBeUndefined();
    expect(whole.lost).toBeUndefined();
    expect(whole.executionCount).toBeGreaterThan(0);
    expect((await running).stdout).toBe(EXPECTED);
  });

  it('says a cell raised, with its error and what it displayed', async () => {
    await using kernel = await GatewayKernel.start({ gateway: ticket });
    const code = "print('before')\n1 + 1\nraise ValueError('no')";
    const result = await kernel.execute(code);
    expect(result.status).toBe('error');
    const client = new GatewayClient({ baseUrl: ticket.baseUrl, token: ticket.token });
    const collected = await collectCell(client, kernel.id, await requestId(client, kernel.id, code), {
      waitMs: 10_000,
    });
    expect(collected).toMatchObject({ complete: true, status: 'error', stdout: 'before\n' });
    expect(collected.error?.ename).toBe('ValueError');
    expect(collected.outputs.map((o) => o.type)).toEqual(['stream', 'error']);
  });

  it("a new process attaches to the running kernel and collects a running cell's whole output by its message id after the process that ran it is gone", async () => {
    const dir = join(testGateway().root, `collect-${randomBytes(4).toString('hex')}`);
    mkdirSync(dir, { recursive: true });
    const env = { KW_BASE_URL: ticket.baseUrl, KW_TOKEN: ticket.token, KW_CLIENT: CLIENT, KW_CODE: SLOW };
    // The first process starts a kernel and a long cell, says which, and ends while the cell runs (no shutdown).
    const started = await runProcess(
      dir,
      `const { GatewayKernel } = await import(process.env.KW_CLIENT);
const kernel = await GatewayKernel.start({ gateway: { baseUrl: process.env.KW_BASE_URL, token: process.env.KW_TOKEN } });
let msgId;
kernel.on('execute-request', (event) => {
  msgId ??= event.msgId;
});
let lines = 0;
const said = () => JSON.stringify({ kernelId: kernel.id, msgId }) + '\\n';
kernel.execute(process.env.KW_CODE, {
  onOutput: () => {
    if (++lines === 50) process.stdout.write(said(), () => process.exit(0));
  },
}).catch(() => {});
`,
      env,
    );
    const { kernelId, msgId } = JSON.parse(started) as { kernelId: string; msgId: string };
    expect(kernelId).toMatch(/^[0-9a-f-]{36}$/);
    const client = new GatewayClient({ baseUrl: ticket.baseUrl, token: ticket.token });
    try {
      // A process of its own, knowing only the gateway, the kernel id and the message id.
      const collected = await runProcess(
        dir,
        `const { GatewayKernel } = await import(process.env.KW_CLIENT);
const kernel = await GatewayKernel.attach({ gateway: { baseUrl: process.env.KW_BASE_URL, token: process.env.KW_TOKEN }, kernelId: process.env.KW_KERNEL });
const result = await kernel.collect(process.env.KW_MSG, { waitMs: 120000 });
kernel.detach();
process.stdout.write(JSON.stringify(result) + '\\n');
`,
        { ...env, KW_KERNEL: kernelId, KW_MSG: msgId },
      );
      const result = JSON.parse(collected) as {
        complete: boolean;
        status: string;
        stdout: string;
        outputDropped?: boolean;
      };
      expect(result.complete).toBe(true);
      expect(result.status).toBe('ok');
      expect(result.stdout).toBe(EXPECTED);
      expect(result.outputDropped).toBeUndefined();
    } finally {
      await client.deleteKernel(kernelId);
    }
  }, 240_000);

  it('refuses, typed, a kernel whose server keeps no journal', async () => {
    const { baseUrl, token } = testGateway();
    await using kernel = await GatewayKernel.start({ gateway: { baseUrl, token } });
    const client = new GatewayClient({ baseUrl, token });
    const refusal = await collectCell(client, kernel.id, 'any').catch((e: unknown) => e);
    expect(KernelJournalUnavailableError.isInstance(refusal)).toBe(true);
    expect((refusal as KernelJournalUnavailableError).code).toBe('KERNEL_JOURNAL_UNAVAILABLE');
  });
});
