import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type JupyterMessage, V1_SUBPROTOCOL } from '@kernelwarden/jupyter-protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer, WebSocket as WsWebSocket } from 'ws';
import { GatewayAuthError } from './errors.js';
import { GatewayClient, type WebSocketClass } from './gateway-client.js';
import { GatewayKernel } from './gateway-kernel.js';
import { type KernelReplies, type KernelScript, scriptedKernel } from './kernel-script.test-fixture.js';

/** A loopback ws server speaking the channels protocol with a scripted kernel; counts the pongs it receives. */
async function kernelServer(opts: { rejectUpgrade?: number; script?: KernelScript } = {}) {
  const server: Server = createServer();
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => (protocols.has(V1_SUBPROTOCOL) ? V1_SUBPROTOCOL : false),
  });
  const state = { pongs: 0, replies: undefined as KernelReplies | undefined, sockets: [] as WsWebSocket[] };
  const pongWaiters: (() => void)[] = [];
  server.on('upgrade', (req, socket, head) => {
    if (opts.rejectUpgrade) {
      socket.end(`HTTP/1.1 ${opts.rejectUpgrade} Forbidden\r\nContent-Length: 0\r\n\r\n`);
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      state.sockets.push(ws);
      const kernel = scriptedKernel(opts.script ?? {}, (frame) => ws.send(frame));
      state.replies = kernel.replies;
      ws.on('message', (data, isBinary) => kernel.handle(isBinary ? data : data.toString()));
      ws.on('pong', () => {
        state.pongs++;
        for (const w of pongWaiters.splice(0)) w();
      });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const method = init?.method ?? 'GET';
    if (method === 'POST' && String(input).endsWith('/api/kernels')) {
      return new Response(JSON.stringify({ id: 'k1', name: 'python3' }), { status: 201 });
    }
    return new Response(null, { status: 204 });
  }) as typeof globalThis.fetch;
  return {
    baseUrl,
    fetch,
    state,
    pongArrived: () => new Promise<void>((r) => pongWaiters.push(r)),
    async [Symbol.asyncDispose]() {
      for (const ws of state.sockets) ws.terminate();
      wss.close();
      server.close();
      server.closeAllConnections();
    },
  };
}

/** The `ws` WebSocket with a counter on `pong()`, so the test sees what the client sends, synchronously. */
const sent = { pongs: 0 };
class CountingWebSocket extends WsWebSocket {
  override pong(...args: Parameters<WsWebSocket['pong']>): void {
    sent.pongs++;
    super.pong(...args);
  }
}

afterEach(() => {
  sent.pongs = 0;
});

describe('stall workaround (unsolicited pong)', () => {
  it('sends a pong after each message received while a request is pending, and none while idle', async () => {
    await using server = await kernelServer();
    const client = new GatewayClient({
      baseUrl: server.baseUrl,
      fetch: server.fetch,
      WebSocket: CountingWebSocket as unknown as WebSocketClass,
    });
    await using kernel = await GatewayKernel.start({ gateway: client });
    expect(kernel.protocol).toBe('v1');

    // Nothing pending: unsolicited messages are not acknowledged with pongs.
    sent.pongs = 0;
    // Three unsolicited messages, then a malformed frame: its protocol-error event says all of them were handled.
    const handled = new Promise<void>((resolve) => kernel.on('protocol-error', () => resolve()));
    for (const state of ['busy', 'idle', 'busy']) {
      server.state.replies?.send('iopub', 'status', { execution_state: state });
    }
    server.state.sockets.at(-1)?.send(new Uint8Array([1, 2, 3]));
    await handled;
    expect(sent.pongs).toBe(0);

    // A cell: busy, execute_reply, idle. Pongs follow the messages received while it is pending (one per read:
    // messages that arrive together share one), none after idle.
    const arrived = server.pongArrived();
    const result = await kernel.execute('print(1)');
    expect(result.status).toBe('ok');
    expect(sent.pongs).toBeGreaterThanOrEqual(1);
    expect(sent.pongs).toBeLessThanOrEqual(2);
    await arrived;
    expect(server.state.pongs).toBeGreaterThan(0);
  });

  it('does not acknowledge a flood: the first 64 messages of a chatty cell get a pong each, then only a pause after the reply', async () => {
    // 400 stream messages, each written on its own a tick apart (one read each), a 60 ms pause, the reply, another
    // 60 ms pause, then the idle.
    const counts: number[] = [];
    await using server = await kernelServer({
      script: {
        execute: (req, r) => {
          r.send('iopub', 'status', { execution_state: 'busy' }, req);
          let n = 0;
          const next = () => {
            if (n < 400) {
              r.send('iopub', 'stream', { name: 'stdout', text: `${n++}\n` }, req);
              setImmediate(next);
              return;
            }
            counts.push(sent.pongs);
            setTimeout(() => {
              counts.push(sent.pongs);
              r.send('shell', 'execute_reply', { status: 'ok', execution_count: 1 }, req);
              setTimeout(() => {
                counts.push(sent.pongs);
                r.send('iopub', 'status', { execution_state: 'idle' }, req);
              }, 60);
            }, 60);
          };
          setImmediate(next);
        },
      },
    });
    const client = new GatewayClient({
      baseUrl: server.baseUrl,
      fetch: server.fetch,
      WebSocket: CountingWebSocket as unknown as WebSocketClass,
    });
    await using kernel = await GatewayKernel.start({ gateway: client });
    sent.pongs = 0;
    const result = await kernel.execute('flood');
    expect(result.stdout.split('\n').length).toBe(401);
    const [duringFlood, afterFloodPause, afterReplyPause] = counts as [number, number, number];
    // 64 immediate pongs at most while the flood flows — not one per message — and none in its pause.
    expect(duringFlood).toBeGreaterThanOrEqual(1);
    expect(duringFlood).toBeLessThanOrEqual(64);
    expect(afterFloodPause).toBe(duringFlood);
    // After the reply, a pause gets its pong: the idle that the server's Nagle may hold back is released.
    expect(afterReplyPause).toBeGreaterThan(afterFloodPause);
    // Nothing pending: no pong.
    sent.pongs = 0;
    await new Promise((r) => setTimeout(r, 50));
    expect(sent.pongs).toBe(0);
  });

  it('sends no pong at all when turned off', async () => {
    await using server = await kernelServer();
    const client = new GatewayClient({
      baseUrl: server.baseUrl,
      fetch: server.fetch,
      WebSocket: CountingWebSocket as unknown as WebSocketClass,
    });
    await using kernel = await GatewayKernel.start({ gateway: client, stallWorkaround: false });
    await kernel.execute('print(1)');
    await kernel.execute('print(2)');
    expect(sent.pongs).toBe(0);
  });
});

describe('waiting for a lost idle', () => {
  it('does not take an idle that waits in the socket behind a blocked event loop for a lost one', async () => {
    await using server = await kernelServer({
      script: {
        execute: (req, r) => {
          r.send('iopub', 'status', { execution_state: 'busy' }, req);
          r.send('shell', 'execute_reply', { status: 'ok', execution_count: 1 }, req);
          // In a check phase after the reply was read: the idle is written, then the event loop is blocked past
          // idleGraceMs. In the next loop iteration the grace timer is due (timers phase) before the socket is read
          // (poll phase).
          setTimeout(() => {
            setImmediate(() => {
              r.send('iopub', 'status', { execution_state: 'idle' }, req);
              const until = performance.now() + 200;
              while (performance.now() < until) {
                // blocked
              }
            });
          }, 20);
        },
      },
    });
    await using kernel = await GatewayKernel.start({
      gateway: { baseUrl: server.baseUrl, fetch: server.fetch },
      idleGraceMs: 50,
    });
    const result = await kernel.execute('x');
    expect(result.status).toBe('ok');
    expect(result.outputDropped).toBeUndefined();
  });
});

describe('heartbeat', () => {
  // The heartbeat has a timer of its own: it watches with the liveness poll turned off too.
  it.each([20, 0])(
    'reopens a socket that hangs without closing, and the pending cell completes on the new one (livenessPollMs %i)',
    async (livenessPollMs) => {
      let request: JupyterMessage | undefined;
      await using server = await kernelServer({
        script: {
          execute: (req, r) => {
            request = req;
            r.send('iopub', 'status', { execution_state: 'busy' }, req);
            // The connection hangs: the server neither reads (no pong to our ping) nor sends.
            server.state.sockets.at(-1)?.pause();
          },
        },
      });
      await using kernel = await GatewayKernel.start({
        gateway: { baseUrl: server.baseUrl, fetch: server.fetch },
        livenessPollMs,
        heartbeatMs: 100,
        reconnect: { initialDelayMs: 1 },
      });
      const events: string[] = [];
      kernel.on('reconnecting', () => events.push('reconnecting'));
      kernel.on('reconnected', () => {
        events.push('reconnected');
        // What the server replays on the new socket.
        const req = request as JupyterMessage;
        server.state.replies?.send('iopub', 'stream', { name: 'stdout', text: 'after\n' }, req);
        server.state.replies?.send('shell', 'execute_reply', { status: 'ok', execution_count: 1 }, req);
        server.state.replies?.send('iopub', 'status', { execution_state: 'idle' }, req);
      });
      const result = await kernel.execute('x');
      expect(result).toMatchObject({ status: 'ok', stdout: 'after\n' });
      expect(events).toEqual(['reconnecting', 'reconnected']);
      expect(server.state.sockets.length).toBe(2);
    },
  );

  it('leaves a silent cell on a healthy socket alone: pings are answered, nothing reconnects', async () => {
    await using server = await kernelServer({
      script: {
        execute: (req, r) => {
          r.send('iopub', 'status', { execution_state: 'busy' }, req);
          setTimeout(() => r.ok(req, { stdout: 'slept\n' }), 600);
        },
      },
    });
    await using kernel = await GatewayKernel.start({
      gateway: { baseUrl: server.baseUrl, fetch: server.fetch },
      livenessPollMs: 20,
      heartbeatMs: 100,
    });
    let pings = 0;
    server.state.sockets.at(-1)?.on('ping', () => pings++);
    const events: string[] = [];
    kernel.on('reconnecting', () => events.push('reconnecting'));
    const result = await kernel.execute('import time; time.sleep(0.6)');
    expect(result).toMatchObject({ status: 'ok', stdout: 'slept\n' });
    expect(pings).toBeGreaterThanOrEqual(2);
    expect(events).toEqual([]);
  });
});

describe('channels socket errors', () => {
  it('turns a 403 on the WebSocket upgrade into GatewayAuthError and deletes the kernel', async () => {
    await using server = await kernelServer({ rejectUpgrade: 403 });
    const deletes: string[] = [];
    const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
      if (init?.method === 'DELETE') deletes.push(String(input));
      return server.fetch(input, init);
    }) as typeof globalThis.fetch;
    const error = await GatewayKernel.start({ gateway: { baseUrl: server.baseUrl, token: 'tok-xyz', fetch } }).catch(
      (e: unknown) => e,
    );
    expect(GatewayAuthError.isInstance(error)).toBe(true);
    expect((error as Error).message).not.toContain('tok-xyz');
    expect(deletes).toEqual([`${server.baseUrl}/api/kernels/k1`]);
  });
});
