import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { systemClock } from '@kernelwarden/core';
import {
  createMessage,
  decodeFrame,
  encodeFrame,
  type JupyterMessage,
  V1_SUBPROTOCOL,
  type WireFormat,
} from '@kernelwarden/jupyter-protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer, type WebSocket as WsWebSocket } from 'ws';
import { KernelChannel, type KernelChannelOptions, MAX_MESSAGE_ID_CHARS } from './channel.js';
import { GatewayAuthError, GatewayUnavailableError, type ProtocolError } from './errors.js';
import type { WebSocketClass } from './gateway-client.js';
import { DEFAULT_MAX_FRAME_BYTES } from './gateway-kernel-options.js';

/** A loopback channels endpoint: records what clients send, sends what the test says, drops sockets on cue. */
async function channelsServer(opts: { v1?: boolean; rejectUpgrade?: number } = {}) {
  const server: Server = createServer();
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => (opts.v1 !== false && protocols.has(V1_SUBPROTOCOL) ? V1_SUBPROTOCOL : false),
  });
  const sockets: WsWebSocket[] = [];
  const received: JupyterMessage[] = [];
  const urls: string[] = [];
  const waiters: (() => void)[] = [];
  const held: { destroy(): void }[] = [];
  let hanging = false;
  server.on('upgrade', (req, socket, head) => {
    if (hanging) {
      // Accepts the connection, never answers the upgrade: a hung server or proxy.
      held.push(socket);
      return;
    }
    if (opts.rejectUpgrade) {
      socket.end(`HTTP/1.1 ${opts.rejectUpgrade} Forbidden\r\nContent-Length: 0\r\n\r\n`);
      return;
    }
    urls.push(req.url ?? '');
    wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.push(ws);
      const format: WireFormat = ws.protocol === V1_SUBPROTOCOL ? 'v1' : 'legacy';
      ws.on('message', (data, isBinary) => {
        received.push(decodeFrame(isBinary ? new Uint8Array(data as Buffer) : data.toString(), format));
        for (const w of waiters.splice(0)) w();
      });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `ws://127.0.0.1:${port}/api/kernels/k/channels?session_id=s`,
    /** From now on, accept connections but never answer their upgrade. */
    hangUpgrades() {
      hanging = true;
    },
    /** How many connections were left hanging. */
    held: () => held.length,
    sockets,
    received,
    urls,
    /** Sends `msg` on the newest socket in its negotiated format. */
    send(msg: JupyterMessage) {
      const ws = sockets.at(-1) as WsWebSocket;
      ws.send(encodeFrame(msg, ws.protocol === V1_SUBPROTOCOL ? 'v1' : 'legacy'));
    },
    async nextReceived(): Promise<void> {
      await new Promise<void>((resolve) => waiters.push(resolve));
    },
    async [Symbol.asyncDispose]() {
      for (const socket of held) socket.destroy();
      for (const ws of sockets) ws.terminate();
      wss.close();
      server.close();
      server.closeAllConnections();
    },
  };
}

type ChannelsServer = Awaited<ReturnType<typeof channelsServer>>;

/** A channel on `server` whose callbacks are recorded. */
function channelOn(server: ChannelsServer, extra: Partial<KernelChannelOptions> = {}) {
  const log: string[] = [];
  const messages: JupyterMessage[] = [];
  const errors: ProtocolError[] = [];
  let lost: Error | undefined;
  const reconnected: (() => void)[] = [];
  const channel = new KernelChannel({
    WebSocket: WebSocket as unknown as WebSocketClass,
    url: server.url,
    sessionId: 'client-session',
    headers: {},
    where: 'kernel k at test',
    protocol: 'auto',
    reconnect: { attempts: 3, initialDelayMs: 5, maxDelayMs: 20, attemptTimeoutMs: 0 },
    maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
    clock: systemClock,
    onMessage: (msg) => messages.push(msg),
    onProtocolError: (error) => errors.push(error),
    onFrameTooLarge: (error) => errors.push(error),
    onReconnecting: (attempt) => log.push(`reconnecting ${attempt}`),
    onReconnected: () => {
      log.push('reconnected');
      for (const r of reconnected.splice(0)) r();
    },
    onLost: (error) => {
      lost = error;
      log.push('lost');
    },
    ...extra,
  });
  channels.push(channel);
  return {
    channel,
    log,
    messages,
    errors,
    lost: () => lost,
    reconnected: () => new Promise<void>((resolve) => reconnected.push(resolve)),
  };
}

const channels: KernelChannel[] = [];
afterEach(() => {
  for (const channel of channels.splice(0)) channel.close();
});

const until = async (check: () => boolean, ms = 2000) => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 2));
  }
};
const kernelMessage = (id: string, text: string) => {
  const msg = createMessage('iopub', 'stream', 'kernel-session', { name: 'stdout', text });
  msg.header.msg_id = id;
  return msg;
};

describe('KernelChannel', () => {
  it('negotiates v1, sends requests and hands every message over in arrival order', async () => {
    await using server = await channelsServer();
    const { channel, messages } = channelOn(server);
    await channel.open();
    expect(channel.format).toBe('v1');
    expect(channel.isOpen).toBe(true);
    const request = createMessage('shell', 'kernel_info_request', 'client-session', {});
    const arrived = server.nextReceived();
    channel.send(request);
    await arrived;
    expect(server.received[0]?.header.msg_id).toBe(request.header.msg_id);
    for (let i = 0; i < 5; i++) server.send(kernelMessage(`m${i}`, `${i}`));
    await until(() => messages.length === 5);
    expect(messages.map((m) => m.content.text)).toEqual(['0', '1', '2', '3', '4']);
    expect(channel.received).toBe(5);
  });

  it('turns an exception thrown while handling a message into a ProtocolError naming its parent; the socket goes on', async () => {
    await using server = await channelsServer();
    let calls = 0;
    const { channel, messages, errors } = channelOn(server, {
      onMessage: (msg) => {
        if (++calls === 1) throw new TypeError("Cannot read properties of null (reading 'msg_id')");
        messages.push(msg);
      },
    });
    await channel.open();
    const first = kernelMessage('a', 'first');
    first.parent_header = { msg_id: 'cell-request' };
    server.send(first);
    server.send(kernelMessage('b', 'second'));
    await until(() => messages.length === 1);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ code: 'PROTOCOL', parentMsgId: 'cell-request' });
    expect(errors[0]?.message).toMatch(/could not be handled: Cannot read properties of null/);
    expect(messages[0]?.content.text).toBe('second');
    expect(channel.isOpen).toBe(true);
  });

  it('drops a kernel message whose msg_id is too long to remember for de-duplication, as a ProtocolError', async () => {
    await using server = await channelsServer();
    const { channel, messages, errors } = channelOn(server);
    await channel.open();
    const long = kernelMessage('i'.repeat(MAX_MESSAGE_ID_CHARS + 1), 'dropped');
    long.parent_header = { msg_id: 'cell-request' };
    server.send(long);
    server.send(kernelMessage('i'.repeat(MAX_MESSAGE_ID_CHARS), 'kept'));
    await until(() => messages.length === 1);
    expect(messages[0]?.content.text).toBe('kept');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ parentMsgId: 'cell-request' });
    expect(errors[0]?.message).toMatch(/msg_id of 257 characters, more than 256/);
  });

  it('refuses a frame over maxFrameBytes with ws before buffering it, and reopens the socket', async () => {
    await using server = await channelsServer();
    const { channel, messages, errors, reconnected } = channelOn(server, { maxFrameBytes: 10_000 });
    await channel.open();
    const back = reconnected();
    server.send(kernelMessage('big', 'x'.repeat(20_000)));
    await back;
    expect(errors).toHaveLength(1);
    expect(errors[0]?.message).toMatch(/more than maxFrameBytes \(10000\); it was dropped unread/);
    server.send(kernelMessage('small', 'fits'));
    await until(() => messages.length === 1);
    expect(messages[0]?.content.text).toBe('fits');
  });

  it("falls back to legacy when the server does not pick v1, with 'auto'", async () => {
    await using server = await channelsServer({ v1: false });
    const { channel, messages } = channelOn(server);
    await channel.open();
    expect(channel.format).toBe('legacy');
    server.send(kernelMessage('a', 'legacy text'));
    await until(() => messages.length === 1);
    expect(messages[0]?.content.text).toBe('legacy text');
  });

  it('drops replayed duplicates of kernel messages, but never the server’s own messages under this session', async () => {
    await using server = await channelsServer();
    const { channel, messages } = channelOn(server);
    await channel.open();
    server.send(kernelMessage('dup', 'once'));
    server.send(kernelMessage('dup', 'once'));
    const own = createMessage('iopub', 'status', 'client-session', { execution_state: 'restarting' });
    own.header.msg_id = 'server-0';
    server.send(own);
    server.send(own);
    server.send(kernelMessage('last', 'end'));
    await until(() => messages.some((m) => m.header.msg_id === 'last'));
    expect(messages.map((m) => m.header.msg_id)).toEqual(['dup', 'server-0', 'server-0', 'last']);
  });

  it('reports a malformed frame as a protocol error and keeps reading', async () => {
    await using server = await channelsServer();
    const { channel, messages, errors } = channelOn(server);
    await channel.open();
    server.sockets.at(-1)?.send(new Uint8Array([1, 2, 3]));
    server.send(kernelMessage('after', 'still here'));
    await until(() => messages.length === 1);
    expect(errors).toHaveLength(1);
    expect(errors[0]?.code).toBe('PROTOCOL');
  });

  it('reconnects with the same URL after a drop, queueing requests sent meanwhile', async () => {
    await using server = await channelsServer();
    const { channel, log, reconnected } = channelOn(server);
    await channel.open();
    const back = reconnected();
    server.sockets.at(-1)?.terminate();
    await until(() => log.includes('reconnecting 1'));
    expect(channel.isReconnecting).toBe(true);
    const queued = createMessage('shell', 'execute_request', 'client-session', { code: '1' });
    channel.send(queued);
    await back;
    await until(() => server.received.some((m) => m.header.msg_id === queued.header.msg_id));
    expect(server.urls).toEqual([server.urls[0], server.urls[0]]);
    expect(log).toEqual(['reconnecting 1', 'reconnected']);
  });

  it('gives up after the reconnect budget and reports the loss once', async () => {
    const server = await channelsServer();
    const { channel, log, lost } = channelOn(server);
    await channel.open();
    await server[Symbol.asyncDispose]();
    await until(() => log.includes('lost'));
    expect(log).toEqual(['reconnecting 1', 'reconnecting 2', 'reconnecting 3', 'lost']);
    expect(GatewayUnavailableError.isInstance(lost())).toBe(true);
    expect(channel.isOpen).toBe(false);
  });

  it('gives each reconnect attempt attemptTimeoutMs to open, so a server that never answers the upgrade ends in a loss', async () => {
    await using server = await channelsServer();
    const { channel, log, lost } = channelOn(server, {
      reconnect: { attempts: 2, initialDelayMs: 5, maxDelayMs: 20, attemptTimeoutMs: 100 },
    });
    await channel.open();
    server.hangUpgrades();
    server.sockets.at(-1)?.terminate();
    await until(() => log.includes('lost'), 5000);
    expect(log).toEqual(['reconnecting 1', 'reconnecting 2', 'lost']);
    expect(GatewayUnavailableError.isInstance(lost())).toBe(true);
    expect(String((lost() as Error & { cause?: unknown }).cause)).toMatch(/did not open within 100 ms/);
    expect(server.held()).toBe(2);
  });

  it('turns a 403 on the upgrade into GatewayAuthError, and does not fall back to legacy', async () => {
    await using server = await channelsServer({ rejectUpgrade: 403 });
    const { channel } = channelOn(server);
    const error = await channel.open().catch((e: unknown) => e);
    expect(GatewayAuthError.isInstance(error)).toBe(true);
    expect(server.urls).toEqual([]);
  });

  it('pings and tracks when it last heard from the socket; a pong counts as heard', async () => {
    await using server = await channelsServer();
    const { channel } = channelOn(server);
    await channel.open();
    expect(channel.canPing).toBe(true);
    expect(channel.canPong).toBe(true);
    const before = channel.lastHeardAt;
    await new Promise((r) => setTimeout(r, 5));
    channel.ping();
    expect(channel.pingSentAt).toBeDefined();
    await until(() => channel.pingSentAt === undefined);
    expect(channel.lastHeardAt).toBeGreaterThan(before);
    const pongs = new Promise<void>((resolve) => server.sockets.at(-1)?.once('pong', () => resolve()));
    channel.pong();
    await pongs;
  });

  it('terminates a socket taken for hung and reopens it', async () => {
    await using server = await channelsServer();
    const { channel, log, reconnected } = channelOn(server);
    await channel.open();
    const back = reconnected();
    channel.dropHung(new Error('answered no ping'));
    await back;
    expect(server.sockets).toHaveLength(2);
    expect(log).toEqual(['reconnecting 1', 'reconnected']);
  });

  it('reopen() replaces the socket on purpose without reporting a drop; close() is final', async () => {
    await using server = await channelsServer();
    const { channel, log } = channelOn(server);
    await channel.open();
    await channel.reopen();
    expect(server.sockets).toHaveLength(2);
    expect(log).toEqual([]);
    channel.close();
    channel.close();
    channel.send(createMessage('shell', 'kernel_info_request', 'client-session', {}));
    await channel.reopen();
    expect(server.sockets).toHaveLength(2);
    expect(channel.isOpen).toBe(false);
  });

  it('builds its URL and headers from the client for a kernel', async () => {
    const { GatewayClient } = await import('./gateway-client.js');
    const client = new GatewayClient({ baseUrl: 'http://127.0.0.1:1/base', token: 'tok' });
    const channel = KernelChannel.forKernel(
      client,
      'k-1',
      'sess',
      {
        protocol: 'legacy',
        reconnect: { attempts: 0, initialDelayMs: 1, maxDelayMs: 1, attemptTimeoutMs: 0 },
        maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
        clock: systemClock,
      },
      {
        onMessage() {},
        onProtocolError() {},
        onFrameTooLarge() {},
        onReconnecting() {},
        onReconnected() {},
        onLost() {},
      },
    );
    channels.push(channel);
    const error = await channel.open().catch((e: unknown) => e);
    expect(GatewayUnavailableError.isInstance(error)).toBe(true);
    expect((error as Error).message).toContain('kernel k-1 at http://127.0.0.1:1/base');
    expect((error as Error).message).not.toContain('tok');
  });
});
