import { describe, expect, it } from 'vitest';
import { listenerOwnership, parseLoopbackListeners, socketInodes, verifiedListenerInodes } from './listener.js';

const TABLE = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0000000000000000 100 0 0 10 0
   2: 0100007F:22B8 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 4444 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 4545 1 0000000000000000 100 0 0 10 0
`;

describe('parseLoopbackListeners', () => {
  it('keeps only sockets listening on 127.0.0.1, with their uid and inode', () => {
    expect(parseLoopbackListeners(TABLE)).toEqual([
      { port: 8888, uid: 0, inode: '4242' },
      { port: 8080, uid: 1001, inode: '4545' },
    ]);
  });

  it('ignores blank and short lines', () => {
    expect(parseLoopbackListeners('header\n\n  0: 0100007F:22B8\n')).toEqual([]);
  });
});

describe('listenerOwnership', () => {
  it('tells a port nobody listens on from one held by another process', async () => {
    const { createServer } = await import('node:net');
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      expect(listenerOwnership(port, process.pid)).toBe('ours');
      // Again, from the sockets it was found holding.
      expect(listenerOwnership(port, process.pid)).toBe('ours');
      // Held by this process, so not by pid 1.
      expect(listenerOwnership(port, 1)).toBe('foreign');
      // Another user's socket is foreign even when the pid holds it.
      expect(listenerOwnership(port, process.pid, (process.getuid?.() ?? 0) + 1)).toBe('foreign');
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
    // Closed: the sockets it was found holding are gone, so the port is read again.
    expect(listenerOwnership(port, process.pid)).toBe('none');
  });
});

describe('listenerOwnership with sockets an earlier process recorded', () => {
  it('trusts them while the process holds them, and reads the port again once it does not', async () => {
    const { createServer } = await import('node:net');
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const uid = (process.getuid?.() ?? 0) + 7; // a key of its own: nothing verified in this process yet
    let recorded: string[];
    try {
      expect(listenerOwnership(port, process.pid)).toBe('ours');
      recorded = verifiedListenerInodes(port, process.pid);
      expect(recorded.length).toBeGreaterThan(0);
      expect(recorded.every((inode) => socketInodes(process.pid).has(inode))).toBe(true);
      // Port 1 has no listener in /proc/net/tcp: only the recorded sockets, still held, can make it ours.
      expect(listenerOwnership(1, process.pid, uid, recorded)).toBe('ours');
      expect(verifiedListenerInodes(1, process.pid, uid)).toEqual(recorded);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
    // Closed: the recorded sockets are no longer held, so /proc/net/tcp decides, and nothing listens there.
    expect(listenerOwnership(port, process.pid, uid + 1, recorded)).toBe('none');
    expect(verifiedListenerInodes(port, process.pid, uid + 1)).toEqual([]);
  });
});
