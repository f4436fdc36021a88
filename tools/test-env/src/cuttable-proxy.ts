import { once } from 'node:events';
import { createConnection, createServer, type Socket } from 'node:net';

/** A loopback TCP proxy in front of a server whose connections a test can cut, as a flaky network would. */
export interface CuttableProxy {
  /** `http://127.0.0.1:<proxy port>`. */
  readonly baseUrl: string;
  /** Connections open now. */
  readonly open: number;
  /**
   * Destroys every open connection whose first request line contains `needle` (e.g. a kernel id, which is in its
   * channels URL), both sides at once, without a close handshake; returns how many were cut.
   */
  cut(needle: string): number;
  /** Cuts everything and stops listening. */
  close(): Promise<void>;
}

interface Link {
  client: Socket;
  upstream: Socket;
  head: string;
}

/** Starts a proxy to `127.0.0.1:targetPort` on a free loopback port. */
export async function cuttableProxy(targetPort: number): Promise<CuttableProxy> {
  const links = new Set<Link>();
  const server = createServer((client) => {
    const upstream = createConnection({ host: '127.0.0.1', port: targetPort });
    const link: Link = { client, upstream, head: '' };
    links.add(link);
    const drop = () => {
      links.delete(link);
      client.destroy();
      upstream.destroy();
    };
    client.once('data', (chunk: Buffer) => {
      link.head = chunk.subarray(0, 512).toString('latin1').split('\r\n')[0] ?? '';
    });
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    get open() {
      return links.size;
    },
    cut(needle) {
      let cut = 0;
      for (const link of [...links]) {
        if (!link.head.includes(needle)) continue;
        links.delete(link);
        link.client.resetAndDestroy();
        link.upstream.resetAndDestroy();
        cut++;
      }
      return cut;
    },
    async close() {
      for (const link of [...links]) {
        link.client.destroy();
        link.upstream.destroy();
      }
      links.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
