import { afterEach, describe, expect, it } from 'vitest';
import { FakeWebSocket } from './fake-websocket.js';

afterEach(() => FakeWebSocket.reset());

describe('FakeWebSocket', () => {
  it('is constructible like WebSocket, opens in a microtask with the first offered protocol, and is listed', async () => {
    const ws = new FakeWebSocket('ws://127.0.0.1:1/api/kernels/k/channels', ['v1.kernel.websocket.jupyter.org'], {
      headers: { Authorization: 'token t' },
    });
    expect(ws.readyState).toBe(FakeWebSocket.CONNECTING);
    expect(FakeWebSocket.instances).toEqual([ws]);
    const opened = new Promise<Event>((resolve) => {
      ws.onopen = resolve;
    });
    await opened;
    expect(ws.readyState).toBe(FakeWebSocket.OPEN);
    expect(ws.protocol).toBe('v1.kernel.websocket.jupyter.org');
    expect(ws.options).toEqual({ headers: { Authorization: 'token t' } });
  });

  it('records sent frames and refuses to send while connecting', async () => {
    FakeWebSocket.autoOpen = false;
    const ws = new FakeWebSocket('ws://x');
    expect(() => ws.send('early')).toThrow(/CONNECTING/);
    ws.open({ protocol: '' });
    ws.send(JSON.stringify({ header: { msg_type: 'kernel_info_request' } }));
    ws.send(new Uint8Array([1, 2]));
    expect(ws.sent).toHaveLength(2);
    expect(ws.sentJson()).toEqual([{ header: { msg_type: 'kernel_info_request' } }]);
  });

  it('delivers messages to onmessage and listeners, converting binary to binaryType', async () => {
    const ws = new FakeWebSocket('ws://x');
    await Promise.resolve();
    const seen: unknown[] = [];
    ws.onmessage = (e) => seen.push(e.data);
    ws.addEventListener('message', (e) => seen.push((e as MessageEvent).data));
    ws.receive('text');
    ws.binaryType = 'arraybuffer';
    ws.receive(new Uint8Array([7]));
    ws.binaryType = 'nodebuffer';
    ws.receive(new Uint8Array([8]));
    expect(seen[0]).toBe('text');
    expect(seen[1]).toBe('text');
    expect(seen[2]).toBeInstanceOf(ArrayBuffer);
    expect(new Uint8Array(seen[2] as ArrayBuffer)).toEqual(new Uint8Array([7]));
    expect(Buffer.isBuffer(seen[4])).toBe(true);
  });

  it('closes cleanly from the client, dropped from the server, and fails with error then close', async () => {
    const client = new FakeWebSocket('ws://a');
    const server = new FakeWebSocket('ws://b');
    const failing = new FakeWebSocket('ws://c');
    await Promise.resolve();
    const log: string[] = [];
    for (const ws of [client, server, failing]) {
      ws.onclose = (e) => log.push(`${ws.url} close ${e.code} ${e.wasClean}`);
      ws.onerror = (e) => log.push(`${ws.url} error ${e.message}`);
    }
    client.close();
    expect(client.readyState).toBe(FakeWebSocket.CLOSED);
    server.serverClose();
    failing.fail(new Error('ECONNRESET'));
    await Promise.resolve();
    expect(log).toEqual([
      'ws://c error ECONNRESET',
      'ws://a close 1000 true',
      'ws://b close 1006 false',
      'ws://c close 1006 false',
    ]);
    client.send('ignored');
    expect(client.sent).toEqual([]);
  });
});
