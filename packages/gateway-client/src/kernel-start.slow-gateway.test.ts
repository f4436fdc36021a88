import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { abortScope, isTimeoutError } from '@kernelwarden/core';
import { ManualClock } from '@kernelwarden/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayBusyError, GatewayCapacityError, KernelStartError } from './errors.js';
import { GatewayClient } from './gateway-client.js';
import { createKernel } from './kernel-create.js';

/**
 * A gateway that answers each create after `createDelayMs` (as a server starting dozens of interpreters on two
 * cores does), with the kernel id the client asked for when `honourId`, and records every request.
 */
interface SlowGateway {
  baseUrl: string;
  requests: { method: string; url: string; body: Record<string, unknown> | undefined; at: number }[];
  kernels: Set<string>;
  /** Create requests whose connection the client closed before an answer. */
  dropped: number;
  answered: Promise<void>;
  close(): Promise<void>;
}

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function slowGateway(opts: {
  createDelayMs: number;
  honourId: boolean;
  answer?: (res: ServerResponse) => boolean;
}): Promise<SlowGateway> {
  const requests: SlowGateway['requests'] = [];
  const kernels = new Set<string>();
  let answeredResolve!: () => void;
  const answered = new Promise<void>((r) => {
    answeredResolve = r;
  });
  const started = Date.now();
  let serial = 0;
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString();
    const body = text ? (JSON.parse(text) as Record<string, unknown>) : undefined;
    requests.push({ method: req.method ?? '', url: req.url ?? '', body, at: Date.now() - started });
    if (req.method === 'POST' && req.url === '/api/kernels') {
      res.on('close', () => {
        if (!res.writableEnded) gateway.dropped++;
      });
      await new Promise((r) => setTimeout(r, opts.createDelayMs));
      if (opts.answer?.(res)) {
        answeredResolve();
        return;
      }
      const id = opts.honourId && typeof body?.kernel_id === 'string' ? body.kernel_id : `server-${++serial}`;
      kernels.add(id);
      res.writeHead(201, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ id, name: body?.name ?? 'python3' }));
      answeredResolve();
      return;
    }
    const deleted = req.method === 'DELETE' ? /^\/api\/kernels\/([^/]+)$/.exec(req.url ?? '') : null;
    if (deleted?.[1]) {
      const id = decodeURIComponent(deleted[1]);
      const known = kernels.delete(id);
      res.writeHead(known ? 204 : 404);
      res.end();
      return;
    }
    res.writeHead(404);
    res.end();
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const gateway: SlowGateway = {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    kernels,
    dropped: 0,
    answered,
    close: () => new Promise((r) => server.close(() => r())),
  };
  return gateway;
}

const startOpts = (startupTimeoutMs: number) => ({
  kernelName: 'python3',
  createAttempts: 1,
  createRetryDelayMs: 10,
  clock: { now: () => performance.now(), setTimer: realTimer },
  cleanupTimeoutMs: 0,
  cleanupRetry: { attempts: 3, initialDelayMs: 50, maxDelayMs: 50 },
  abandonedCreateWaitMs: 60_000,
  startupTimeoutMs,
});

function realTimer(callback: () => void, ms: number) {
  const handle = setTimeout(callback, ms);
  return { cancel: () => clearTimeout(handle) };
}

async function until(check: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('createKernel on a gateway slower than the REST deadline', () => {
  it("waits for the create as long as the start's deadline, not the client's requestTimeoutMs", async () => {
    const gateway = await slowGateway({ createDelayMs: 400, honourId: true });
    const client = new GatewayClient({ baseUrl: gateway.baseUrl, requestTimeoutMs: 100 });
    using scope = abortScope({ timeoutMs: 10_000 });
    const model = await createKernel(client, startOpts(10_000), scope);
    expect(gateway.kernels.has(model.id)).toBe(true);
    const post = gateway.requests.find((r) => r.method === 'POST');
    // The id asked for, and the queue wait: the start's remaining time less what connecting needs.
    expect(post?.body?.kernel_id).toBe(model.id);
    expect(post?.body?.kernelwarden_wait_ms).toBeGreaterThan(4_000);
    expect(post?.body?.kernelwarden_wait_ms).toBeLessThanOrEqual(7_500);
  });

  it('a start whose deadline passes before the create answers fails with GatewayBusyError and deletes the late kernel (server ignoring the id)', async () => {
    const gateway = await slowGateway({ createDelayMs: 600, honourId: false });
    const client = new GatewayClient({ baseUrl: gateway.baseUrl });
    using scope = abortScope({ timeoutMs: 150 });
    const error = await createKernel(client, startOpts(150), scope).catch((e: unknown) => e);
    expect(GatewayBusyError.isInstance(error)).toBe(true);
    expect(isTimeoutError(error)).toBe(true);
    expect(error).toMatchObject({ code: 'GATEWAY_BUSY', retryable: true });
    expect((error as Error).message).toMatch(/busy starting other kernels/);
    await gateway.answered;
    await until(() => gateway.kernels.size === 0 && gateway.requests.filter((r) => r.method === 'DELETE').length >= 2);
    const deletes = gateway.requests.filter((r) => r.method === 'DELETE').map((r) => r.url);
    // The chosen id at once (404 here), then the id the late answer named.
    expect(deletes).toContain('/api/kernels/server-1');
  });

  it("an aborted start rejects with the caller's reason and deletes the kernel under its chosen id", async () => {
    const gateway = await slowGateway({ createDelayMs: 300, honourId: true });
    const client = new GatewayClient({ baseUrl: gateway.baseUrl });
    const controller = new AbortController();
    using scope = abortScope({ signal: controller.signal, timeoutMs: 10_000 });
    const creating = createKernel(client, startOpts(10_000), scope).catch((e: unknown) => e);
    await until(() => gateway.requests.some((r) => r.method === 'POST'));
    controller.abort(new Error('caller gave up'));
    expect(await creating).toMatchObject({ message: 'caller gave up' });
    await gateway.answered;
    await until(() => gateway.kernels.size === 0);
    const chosen = gateway.requests.find((r) => r.method === 'POST')?.body?.kernel_id;
    expect(gateway.requests.filter((r) => r.method === 'DELETE').map((r) => r.url)).toContain(`/api/kernels/${chosen}`);
  });

  it('drops a create given up on that stays unanswered for abandonedCreateWaitMs, and deletes its chosen id again', async () => {
    // The create is never answered (a server stuck starting its kernel).
    const gateway = await slowGateway({ createDelayMs: 0, honourId: true, answer: () => true });
    const client = new GatewayClient({ baseUrl: gateway.baseUrl });
    const clock = new ManualClock();
    using scope = abortScope({ timeoutMs: 100 });
    const error = await createKernel(client, { ...startOpts(100), clock, abandonedCreateWaitMs: 5_000 }, scope).catch(
      (e: unknown) => e,
    );
    expect(GatewayBusyError.isInstance(error)).toBe(true);
    const chosen = gateway.requests.find((r) => r.method === 'POST')?.body?.kernel_id;
    const deletesOfChosen = () =>
      gateway.requests.filter((r) => r.method === 'DELETE' && r.url === `/api/kernels/${chosen}`).length;
    await until(() => deletesOfChosen() === 1);
    // Within the window the late answer is still awaited (its kernel would be deleted).
    await clock.advance(4_999);
    await new Promise((r) => setTimeout(r, 50));
    expect(gateway.dropped).toBe(0);
    expect(deletesOfChosen()).toBe(1);
    // Past it the request is dropped and the chosen id deleted once more.
    await clock.advance(1);
    await until(() => gateway.dropped === 1 && deletesOfChosen() === 2);
  });

  it('tells ownership of the chosen id before the create is sent, and which id the kernel got', async () => {
    for (const honourId of [true, false]) {
      const gateway = await slowGateway({ createDelayMs: 50, honourId });
      const calls: string[] = [];
      let postsWhenCreating = -1;
      const client = new GatewayClient({
        baseUrl: gateway.baseUrl,
        ownership: {
          creating: (id) => {
            postsWhenCreating = gateway.requests.filter((r) => r.method === 'POST').length;
            calls.push(`creating ${id}`);
          },
          notCreated: (id) => calls.push(`notCreated ${id}`),
          created: (id) => calls.push(`created ${id}`),
          deleted: (id) => calls.push(`deleted ${id}`),
        },
      });
      using scope = abortScope({ timeoutMs: 10_000 });
      const model = await createKernel(client, startOpts(10_000), scope);
      const chosen = gateway.requests.find((r) => r.method === 'POST')?.body?.kernel_id as string;
      expect(postsWhenCreating).toBe(0);
      expect(calls).toEqual(
        honourId
          ? [`creating ${chosen}`, `created ${chosen}`]
          : [`creating ${chosen}`, `notCreated ${chosen}`, `created ${model.id}`],
      );
    }
  });

  it('a gateway at capacity fails the create with GatewayCapacityError at once, not retried', async () => {
    const gateway = await slowGateway({
      createDelayMs: 0,
      honourId: true,
      answer: (res) => {
        res.writeHead(503, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ message: 'at capacity: 4 kernels', reason: 'at-capacity', max_kernels: 4 }));
        return true;
      },
    });
    const client = new GatewayClient({ baseUrl: gateway.baseUrl });
    using scope = abortScope({ timeoutMs: 10_000 });
    const error = await createKernel(client, { ...startOpts(10_000), createAttempts: 3 }, scope).catch(
      (e: unknown) => e,
    );
    expect(GatewayCapacityError.isInstance(error)).toBe(true);
    expect(KernelStartError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'GATEWAY_CAPACITY', retryable: true, maxKernels: 4, status: 503 });
    expect(gateway.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
  });

  it("the start queue's busy answer is GatewayBusyError", async () => {
    const gateway = await slowGateway({
      createDelayMs: 0,
      honourId: true,
      answer: (res) => {
        res.writeHead(503, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ message: 'start queue', reason: 'busy', waited_ms: 1234 }));
        return true;
      },
    });
    const client = new GatewayClient({ baseUrl: gateway.baseUrl });
    using scope = abortScope({ timeoutMs: 10_000 });
    const error = await createKernel(client, startOpts(10_000), scope).catch((e: unknown) => e);
    expect(GatewayBusyError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ code: 'GATEWAY_BUSY', retryable: true, waitedMs: 1234 });
  });
});
