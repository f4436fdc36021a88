import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { InvalidOptionsError } from '@kernelwarden/core';
import { FakeGateway } from '@kernelwarden/testkit';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GatewayResponseTooLargeError, InvalidKernelIdError, ProtocolError } from './errors.js';
import { GatewayClient } from './gateway-client.js';
import { DEFAULT_MAX_RESPONSE_BYTES } from './gateway-client-options.js';
import { GatewayKernel } from './gateway-kernel.js';

// A hostile (or broken) remote gateway: real HTTP on loopback whose answers are built to exhaust the client.

type Mode = (req: IncomingMessage, res: ServerResponse) => void;

const BOMB_BYTES = 64 * 1024 * 1024;
let bomb: Buffer | undefined;
/** 64 MiB of zeros gzipped (about 64 KiB on the wire): memory without bound for a client that inflates it all. */
const gzipBomb = () => (bomb ??= gzipSync(Buffer.alloc(BOMB_BYTES)));

const MODES: Record<string, Mode> = {
  bomb: (_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' });
    res.end(gzipBomb());
  },
  endless: (_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    const pump = () => {
      while (!res.destroyed && res.write(chunk)) {}
      if (!res.destroyed) res.once('drain', pump);
    };
    pump();
  },
  drip: (_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.write('[');
    const timer = setInterval(() => res.write(' '), 20);
    res.once('close', () => clearInterval(timer));
  },
  'bad-ids': (req, res) => {
    res.writeHead(req.method === 'POST' ? 201 : 200, { 'Content-Type': 'application/json' });
    const model = { id: '..', name: 'python3' };
    res.end(JSON.stringify(req.method === 'GET' && req.url?.endsWith('/api/kernels') ? [model] : model));
  },
};

let server: Server;
let port: number;
/** Requests received, and how many of their connections have closed. */
let received: string[];
let closed: number;

beforeEach(async () => {
  received = [];
  closed = 0;
  server = createServer((req, res) => {
    received.push(`${req.method} ${req.url}`);
    res.once('close', () => closed++);
    const mode = MODES[(req.url ?? '').split('/')[1] ?? ''];
    if (mode) mode(req, res);
    else res.writeHead(404).end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as AddressInfo).port;
});
afterEach(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const client = (mode: string, extra: Partial<ConstructorParameters<typeof GatewayClient>[0]> = {}) =>
  new GatewayClient({ baseUrl: `http://127.0.0.1:${port}/${mode}`, ...extra });

const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );

/** Waits until every connection the server answered has closed (the client stopped reading and let go). */
async function allClosed(): Promise<void> {
  for (let i = 0; i < 500 && closed < received.length; i++) await new Promise((r) => setTimeout(r, 10));
  expect(closed).toBe(received.length);
}

describe('GatewayClient against a hostile gateway', () => {
  it('stops reading a gzip bomb at maxResponseBytes, counted after decompression, with a typed error', async () => {
    const error = await failure(client('bomb').listKernels());
    expect(GatewayResponseTooLargeError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({
      code: 'GATEWAY_RESPONSE_TOO_LARGE',
      limitBytes: DEFAULT_MAX_RESPONSE_BYTES,
      url: `http://127.0.0.1:${port}/bomb`,
      request: 'GET /api/kernels',
      retryable: false,
    });
    expect((error as Error).message).toMatch(
      /^Gateway at http:\/\/127\.0\.0\.1:\d+\/bomb answered GET \/api\/kernels with a body larger than 8388608 bytes \(maxResponseBytes\)/,
    );
    expect(gzipBomb().byteLength).toBeLessThan(DEFAULT_MAX_RESPONSE_BYTES);
    await allClosed();
  });

  it('stops reading an endless body at a configured maxResponseBytes and lets go of the connection', async () => {
    const error = await failure(client('endless', { maxResponseBytes: 1024 * 1024 }).kernelSpecs());
    expect(error).toMatchObject({ code: 'GATEWAY_RESPONSE_TOO_LARGE', limitBytes: 1024 * 1024 });
    await allClosed();
  });

  it('bounds a body that drips forever by the request deadline, and by the caller signal', async () => {
    const timedOut = await failure(client('drip', { requestTimeoutMs: 300 }).listKernels());
    expect(timedOut).toMatchObject({ name: 'TimeoutError' });
    expect((timedOut as Error).message).toMatch(/did not answer GET \/api\/kernels within 300 ms/);
    const controller = new AbortController();
    const reason = new Error('caller gave up');
    const aborted = failure(client('drip', { requestTimeoutMs: 0 }).getKernel('k1', { signal: controller.signal }));
    setTimeout(() => controller.abort(reason), 100);
    expect(await aborted).toBe(reason);
    await allClosed();
  });

  it('bounds a request transport whose body never ends, and refuses one longer than the limit', async () => {
    const never = new GatewayClient({
      baseUrl: 'http://127.0.0.1:9',
      requestTimeoutMs: 200,
      request: async () => ({ status: 200, text: () => new Promise<string>(() => {}) }),
    });
    expect(await failure(never.listKernels())).toMatchObject({ name: 'TimeoutError' });
    const limits: (number | undefined)[] = [];
    const huge = new GatewayClient({
      baseUrl: 'http://127.0.0.1:9',
      maxResponseBytes: 1000,
      request: async (_url, init) => {
        limits.push(init.maxResponseBytes);
        return { status: 200, text: async () => `[${' '.repeat(2000)}]` };
      },
    });
    expect(await failure(huge.listKernels())).toMatchObject({ code: 'GATEWAY_RESPONSE_TOO_LARGE', limitBytes: 1000 });
    expect(limits).toEqual([1000]);
  });

  it('keeps shutdown() within its timeout when the DELETE answer drips forever', async () => {
    await using gw = await FakeGateway.start();
    const drip = `http://127.0.0.1:${port}/drip`;
    // Everything goes to the fake gateway except the DELETE, which a hostile server answers and never finishes.
    const routed: typeof fetch = (input, init) =>
      fetch(init?.method === 'DELETE' ? String(input).replace(gw.baseUrl, drip) : input, init);
    const kernel = await GatewayKernel.start({
      gateway: { baseUrl: gw.baseUrl, token: gw.token, fetch: routed },
      shutdownTimeoutMs: 500,
    });
    const started = performance.now();
    expect(await kernel.shutdown()).toEqual({ confirmed: false });
    // Generous for a loaded machine; a body that drips forever would hold it for ever.
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(received.some((r) => r.startsWith('DELETE /drip/api/kernels/'))).toBe(true);
    await allClosed();
  });
});

describe('kernel ids', () => {
  const BAD = ['.', '..', '../x', 'a/b', 'a.b', '%2e%2e', 'a b', '', 'x'.repeat(129)];

  it('refuses ids that are not plain ids before sending anything, with InvalidKernelIdError', async () => {
    const c = client('bad-ids');
    for (const id of BAD) {
      for (const call of [
        () => c.getKernel(id),
        () => c.deleteKernel(id),
        () => c.interruptKernel(id),
        () => c.restartKernel(id),
      ]) {
        const error = await failure(call());
        expect(InvalidKernelIdError.isInstance(error), id).toBe(true);
        expect(error).toMatchObject({ code: 'INVALID_KERNEL_ID' });
      }
      expect(() => c.channelsTarget(id, 'session')).toThrow(InvalidKernelIdError);
    }
    expect(received).toEqual([]);
    await expect(c.getKernel('3f2c1a0e-7d1b-4c55-9a57-1b2c3d4e5f60_x')).rejects.toThrow(ProtocolError);
  });

  it("refuses a gateway's answer naming a kernel id that is not a plain id, as a ProtocolError", async () => {
    const c = client('bad-ids');
    const created = await failure(c.createKernel({ name: 'python3' }));
    expect(ProtocolError.isInstance(created)).toBe(true);
    expect((created as Error).message).toMatch(/POST \/api\/kernels with an unexpected body at "id"/);
    expect(ProtocolError.isInstance(await failure(c.listKernels()))).toBe(true);
    expect(ProtocolError.isInstance(await failure(c.restartKernel('k1')))).toBe(true);
  });

  it('GatewayKernel.connect refuses such a kernelId naming the field', async () => {
    const error = await failure(
      GatewayKernel.connect({ gateway: { baseUrl: `http://127.0.0.1:${port}/bad-ids` }, kernelId: '..' }),
    );
    expect(InvalidOptionsError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ path: 'kernelId' });
    expect(received).toEqual([]);
  });
});
