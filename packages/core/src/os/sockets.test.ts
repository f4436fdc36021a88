import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { parseTcpListeners, procNetAddress, socketInodes, tcpListeners } from '../os.js';

const TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0000000000000000 100 0 0 10 0
   2: 0100007F:22B8 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 4444 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 4545 1 0000000000000000 100 0 0 10 0
`;

const TCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5151 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5252 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000100007F:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5353 1 0000000000000000 100 0 0 10 0
`;

const littleEndian = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

describe('parseTcpListeners', () => {
  it.runIf(littleEndian)('keeps the listening sockets of /proc/net/tcp, with address, port, uid and inode', () => {
    expect(parseTcpListeners(TCP)).toEqual([
      { address: '127.0.0.1', port: 8888, uid: 0, inode: '4242' },
      { address: '0.0.0.0', port: 80, uid: 1000, inode: '4343' },
      { address: '127.0.0.1', port: 8080, uid: 1001, inode: '4545' },
    ]);
  });

  it.runIf(littleEndian)('reads the IPv6 addresses of /proc/net/tcp6', () => {
    expect(parseTcpListeners(TCP6)).toEqual([
      { address: '::1', port: 8080, uid: 1000, inode: '5151' },
      { address: '::', port: 22, uid: 0, inode: '5252' },
      { address: '::ffff:7f00:1', port: 80, uid: 0, inode: '5353' },
    ]);
    expect(procNetAddress('000080FE00000000FF005452DE3412FE')).toBe('fe80::5254:ff:fe12:34de');
    expect(procNetAddress('B80D0120000000000000000001000000')).toBe('2001:db8::1');
  });

  it('ignores blank, short and malformed lines', () => {
    expect(parseTcpListeners('header\n\n  0: 0100007F:22B8\n')).toEqual([]);
    const bad = TCP.split('\n')
      .map((line, i) => (i === 1 ? line.replace('0100007F:22B8', 'XYZ:22B8') : line))
      .join('\n');
    expect(parseTcpListeners(bad).map((l) => l.inode)).not.toContain('4242');
    expect(procNetAddress('0100007')).toBeUndefined();
    expect(procNetAddress('')).toBeUndefined();
  });
});

describe('the listening sockets of this machine', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) await new Promise<void>((r) => server.close(() => r()));
  });

  async function listen(host: string): Promise<number> {
    const server = createServer();
    servers.push(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, host, resolve);
    });
    return (server.address() as { port: number }).port;
  }

  it('finds a socket this process listens on, on 127.0.0.1 and on ::1, held by this process', async () => {
    const port4 = await listen('127.0.0.1');
    const port6 = await listen('::1');
    const held = socketInodes(process.pid);
    const uid = process.getuid?.();
    const v4 = tcpListeners(4)?.find((l) => l.port === port4 && l.address === '127.0.0.1');
    const v6 = tcpListeners(6)?.find((l) => l.port === port6 && l.address === '::1');
    expect(v4).toMatchObject({ uid });
    expect(v6).toMatchObject({ uid });
    expect(held.has(v4!.inode)).toBe(true);
    expect(held.has(v6!.inode)).toBe(true);
    expect(socketInodes(1).has(v4!.inode)).toBe(false);
  });

  it('no longer lists a socket once it is closed', async () => {
    const port = await listen('127.0.0.1');
    const inode = tcpListeners(4)?.find((l) => l.port === port)?.inode;
    expect(inode).toMatch(/^\d+$/);
    const server = servers.pop()!;
    await new Promise<void>((r) => server.close(() => r()));
    expect(tcpListeners(4)?.find((l) => l.port === port)).toBeUndefined();
    expect(socketInodes(process.pid).has(inode!)).toBe(false);
  });

  it('holds no sockets for a process that does not exist', () => {
    expect(socketInodes(2 ** 22 + 1).size).toBe(0);
  });
});
