import { testGateway } from '@kernelwarden/test-env';
import { describe, expect, it } from 'vitest';
import { GatewayBusyError, GatewayClient, GatewayKernel } from './index.js';

/**
 * A fetch to the real test server whose creates are answered `delayMs` late (as by a server starting dozens of
 * interpreters on two cores): the server creates the kernel at once; only its answer waits. Records the ids the
 * server's answers named.
 */
function lateCreates(delayMs: number): { fetch: typeof fetch; created: string[]; answered: Promise<void> } {
  const created: string[] = [];
  let answered!: () => void;
  const done = new Promise<void>((resolve) => {
    answered = resolve;
  });
  const late: typeof fetch = async (input, init) => {
    const url = String(input);
    // The create itself is never cut short here: the answer is held back, as a slow server's would be.
    const { signal: _ignored, ...rest } = init ?? {};
    const res = await fetch(input, init?.method === 'POST' && url.endsWith('/api/kernels') ? rest : init);
    if (init?.method !== 'POST' || !url.endsWith('/api/kernels')) return res;
    const body = await res.text();
    try {
      created.push((JSON.parse(body) as { id: string }).id);
    } catch {
      // not a kernel model
    }
    await new Promise((r) => setTimeout(r, delayMs));
    answered();
    if (init.signal?.aborted) throw init.signal.reason;
    return new Response(body, { status: res.status, headers: res.headers });
  };
  return { fetch: late, created, answered: done };
}

async function listed(client: GatewayClient, id: string): Promise<boolean> {
  return (await client.listKernels()).some((k) => k.id === id);
}

describe('GatewayKernel.start against a jupyter-server slow to answer its create', () => {
  it("waits for the create past the client's requestTimeoutMs, up to startupTimeoutMs", async () => {
    const { baseUrl, token } = testGateway();
    const late = lateCreates(1_500);
    const client = new GatewayClient({ baseUrl, token, fetch: late.fetch, requestTimeoutMs: 500 });
    const kernel = await GatewayKernel.start({ gateway: client, startupTimeoutMs: 60_000 });
    try {
      expect(late.created).toEqual([kernel.id]);
      expect((await kernel.execute('6 * 7')).outputs).toContainEqual(
        expect.objectContaining({ data: expect.objectContaining({ 'text/plain': '42' }) }),
      );
    } finally {
      await kernel.shutdown();
    }
  });

  it('a start whose deadline passes first fails with GatewayBusyError, and the kernel created meanwhile is deleted', async () => {
    const { baseUrl, token } = testGateway();
    const late = lateCreates(4_000);
    const client = new GatewayClient({ baseUrl, token, fetch: late.fetch });
    const error = await GatewayKernel.start({ gateway: client, startupTimeoutMs: 1_000 }).catch((e: unknown) => e);
    expect(GatewayBusyError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ name: 'TimeoutError', code: 'GATEWAY_BUSY', retryable: true });
    await late.answered;
    expect(late.created).toHaveLength(1);
    const id = late.created[0] as string;
    const until = Date.now() + 30_000;
    while ((await listed(client, id)) && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    expect(await listed(client, id)).toBe(false);
  });

  it('an aborted start rejects with the reason at once, and the kernel created meanwhile is deleted', async () => {
    const { baseUrl, token } = testGateway();
    const late = lateCreates(3_000);
    const client = new GatewayClient({ baseUrl, token, fetch: late.fetch });
    const controller = new AbortController();
    const starting = GatewayKernel.start({ gateway: client, signal: controller.signal }).catch((e: unknown) => e);
    setTimeout(() => controller.abort(new Error('agent gave up')), 500);
    expect(await starting).toMatchObject({ message: 'agent gave up' });
    await late.answered;
    const id = late.created[0] as string;
    const until = Date.now() + 30_000;
    while ((await listed(client, id)) && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    expect(await listed(client, id)).toBe(false);
  });
});
