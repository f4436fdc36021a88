import { socketInodes } from '@kernelwarden/core/os';
import { describe, expect, it } from 'vitest';
import { listenerOwnership, verifiedListenerInodes } from './listener.js';

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
      // Port 1 has no listener: only the recorded sockets, still held, can make it ours.
      expect(listenerOwnership(1, process.pid, uid, recorded)).toBe('ours');
      expect(verifiedListenerInodes(1, process.pid, uid)).toEqual(recorded);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
    // Closed: the recorded sockets are no longer held, so the table of listening sockets decides, and nothing listens there.
    expect(listenerOwnership(port, process.pid, uid + 1, recorded)).toBe('none');
    expect(verifiedListenerInodes(port, process.pid, uid + 1)).toEqual([]);
  });
});
