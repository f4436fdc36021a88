import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { GatewayResponseTooLargeError } from '@kernelwarden/gateway-client';
import { afterEach, describe, expect, it } from 'vitest';
import { guardedTransport, loopbackRequest } from './guarded-transport.js';

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

describe('guardedTransport', () => {
  it("sends WebSocket frames with an all-zero masking key, the payload as written (the verified loopback server's only)", async () => {
    const frames: Buffer[] = [];
    const upgraded: Duplex[] = [];
    const server = createServer();
    servers.push(server);
    server.on('upgrade', (req, socket: Duplex) => {
      upgraded.push(socket);
      const accept = createHash('sha1')
        .update(`${req.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
        .digest('base64');
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
      );
      socket.on('data', (chunk: Buffer) => frames.push(chunk));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    const baseUrl = `http://127.0.0.1:${port}`;
    const { WebSocket } = guardedTransport(baseUrl, port, process.pid);
    const socket = new WebSocket(`ws://127.0.0.1:${port}/api/kernels/k/channels`);
    await new Promise((resolve, reject) => {
      socket.addEventListener('open', resolve);
      socket.addEventListener('error', reject);
    });
    socket.send('{"hello":"kernel"}');
    for (let i = 0; i < 100 && Buffer.concat(frames).length < 24; i++) await new Promise((r) => setTimeout(r, 10));
    socket.close();
    for (const raw of upgraded) raw.destroy();
    const frame = Buffer.concat(frames);
    expect(frame[0]).toBe(0x81); // FIN, text
    expect(frame[1]).toBe(0x80 | 18); // masked (as a client must), 18 bytes
    expect([...frame.subarray(2, 6)]).toEqual([0, 0, 0, 0]);
    expect(frame.subarray(6, 24).toString()).toBe('{"hello":"kernel"}');
  });
});
