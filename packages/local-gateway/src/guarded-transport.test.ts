import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GatewayResponseTooLargeError } from '@kernelwarden/gateway-client';
import { afterEach, describe, expect, it } from 'vitest';
import { loopbackRequest } from './guarded-transport.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** A server whose answer to every request is `body` chunks of 64 KiB, sent until the client hangs up. */
async function endlessServer(opts: { contentLength?: number } = {}) {
  const state = { written: 0, hungUp: false };
  const server = createServer((_req, res) => {
    res.writeHead(200, {
      'Content-Type': 'application/json',
      ...(opts.contentLength === undefined ? {} : { 'Content-Length': opts.contentLength }),
    });
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    res.on('close', () => {
      state.hungUp = true;
    });
    const pump = () => {
      while (!res.destroyed && state.written < 256 * 1024 * 1024) {
        state.written += chunk.length;
        if (!res.write(chunk)) {
          res.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/kernels`, state };
}

describe('loopbackRequest', () => {
  it('stops reading a body past maxResponseBytes and rejects with GatewayResponseTooLargeError', async () => {
    const { url, state } = await endlessServer();
    const error = await loopbackRequest(url, {
      method: 'GET',
      headers: {},
      signal: new AbortController().signal,
      maxResponseBytes: 100_000,
    }).catch((e: unknown) => e);
    expect(GatewayResponseTooLargeError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({
      code: 'GATEWAY_RESPONSE_TOO_LARGE',
      request: 'GET /api/kernels',
      limitBytes: 100_000,
    });
    // The client hung up instead of reading the endless body.
    await expect.poll(() => state.hungUp, { timeout: 10_000 }).toBe(true);
    expect(state.written).toBeLessThan(256 * 1024 * 1024);
  });

  it('refuses a body whose Content-Length is over the limit before reading it', async () => {
    const { url, state } = await endlessServer({ contentLength: 10 * 1024 * 1024 });
    const error = await loopbackRequest(url, {
      method: 'GET',
      headers: {},
      signal: new AbortController().signal,
      maxResponseBytes: 1024,
    }).catch((e: unknown) => e);
    expect(GatewayResponseTooLargeError.isInstance(error)).toBe(true);
    await expect.poll(() => state.hungUp, { timeout: 10_000 }).toBe(true);
  });

  it('reads a body within the limit whole', async () => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ ok: 'x'.repeat(5000) }));
    });
    servers.push(server);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
    const answer = await loopbackRequest(url, {
      method: 'GET',
      headers: {},
      signal: new AbortController().signal,
      maxResponseBytes: 5015,
    });
    expect(answer.status).toBe(200);
    expect(JSON.parse(await answer.text())).toEqual({ ok: 'x'.repeat(5000) });
  });
});
