import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  collectCell,
  GatewayClient,
  GatewayKernel,
  KernelJournalUnavailableError,
  kernelJournalCapability,
} from '@kernelwarden/gateway-client';
import { testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalGateway, type LocalGatewayLease } from './index.js';

const LINES = 'import time\nfor i in range(1000):\n    print(i, flush=True)\n    time.sleep(0.002)';
const EXPECTED = Array.from({ length: 1000 }, (_, i) => `${i}\n`).join('');

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

describe('collectCell: a running cell read back from the journal by its request id', () => {
  let lease: LocalGatewayLease;

  beforeAll(async () => {
    const stateDir = join(testGateway().root, `journal-collect-${randomBytes(4).toString('hex')}`);
    mkdirSync(stateDir, { recursive: true });
    lease = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool: {} });
  });
  afterAll(async () => {
    await lease?.release();
  });

  it("gives another client the cell's whole output, in order, once it finished, and a prefix while it runs", async () => {
    await using kernel = await GatewayKernel.start({ gateway: lease });
    const running = kernel.execute(LINES);
    // Another process: a client of its own that knows only the gateway, the kernel id and the request's msg_id.
    const other = new GatewayClient({ baseUrl: lease.baseUrl, token: lease.token });
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
    await using kernel = await GatewayKernel.start({ gateway: lease });
    const code = "print('before')\n1 + 1\nraise ValueError('no')";
    const result = await kernel.execute(code);
    expect(result.status).toBe('error');
    const client = new GatewayClient({ baseUrl: lease.baseUrl, token: lease.token });
    const collected = await collectCell(client, kernel.id, await requestId(client, kernel.id, code), {
      waitMs: 10_000,
    });
    expect(collected).toMatchObject({ complete: true, status: 'error', stdout: 'before\n' });
    expect(collected.error?.ename).toBe('ValueError');
    expect(collected.outputs.map((o) => o.type)).toEqual(['stream', 'error']);
  });

  it('refuses, typed, a kernel whose server keeps no journal', async () => {
    const { baseUrl, token } = testGateway();
    await using kernel = await GatewayKernel.start({ gateway: { baseUrl, token } });
    const client = new GatewayClient({ baseUrl, token });
    const refusal = await collectCell(client, kernel.id, 'any').catch((e: unknown) => e);
    expect(KernelJournalUnavailableError.isInstance(refusal)).toBe(true);
    expect((refusal as KernelJournalUnavailableError).code).toBe('KERNEL_JOURNAL_UNAVAILABLE');
  });
});
