import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GatewayClient, GatewayKernel, kernelJournalCapability } from '@kernelwarden/gateway-client';
import { cuttableProxy, testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalGateway, type LocalGatewayTicket } from './index.js';

const CELL = 'import time\nfor i in range(1000):\n    print(i, flush=True)\n    time.sleep(0.002)';
const EXPECTED = Array.from({ length: 1000 }, (_, i) => `${i}\n`).join('');

/** mulberry32: the same seed gives the same cut moments. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** The lines 0, 1, 2, … of `text` are each there once, in order, with nothing between: returns how many. */
function consecutive(text: string): number {
  const lines = text.split('\n');
  expect(lines.at(-1)).toBe('');
  lines.pop();
  lines.forEach((line, i) => {
    if (line !== String(i)) throw new Error(`line ${i} is ${JSON.stringify(line)}`);
  });
  return lines.length;
}

describe('a socket cut mid-cell on the embedded gateway', () => {
  let ticket: LocalGatewayTicket;

  beforeAll(async () => {
    const stateDir = join(testGateway().root, `journal-reconnect-${randomBytes(4).toString('hex')}`);
    mkdirSync(stateDir, { recursive: true });
    ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool: {} });
  });
  afterAll(async () => {
    await ticket?.release();
  });

  it('loses nothing: 1,000 flushed lines arrive once each, in order, and the result says nothing was dropped', async () => {
    const proxy = await cuttableProxy(Number(new URL(ticket.baseUrl).port));
    try {
      const client = new GatewayClient({ baseUrl: proxy.baseUrl, token: ticket.token, ownership: ticket.ownership });
      await using kernel = await GatewayKernel.start({ gateway: client });
      let reconnected = 0;
      kernel.on('reconnected', () => {
        reconnected++;
      });
      let seen = '';
      let cuts = 0;
      const result = await kernel.execute(CELL, {
        onOutput: (output) => {
          if (output.type !== 'stream') return;
          seen += output.text;
          // Cut twice, mid-cell: the journal on the server fills each gap.
          if ((cuts === 0 && seen.includes('\n300\n')) || (cuts === 1 && seen.includes('\n700\n'))) {
            cuts++;
            proxy.cut(kernel.id);
          }
        },
      });
      expect(cuts).toBe(2);
      expect(reconnected).toBeGreaterThanOrEqual(1);
      expect(result.status).toBe('ok');
      expect(result.stdout).toBe(EXPECTED);
      expect(seen).toBe(EXPECTED);
      expect(result.outputDropped).toBeFalsy();
    } finally {
      await proxy.close();
    }
  });

  it('loses nothing across 200 cuts at random moments of a long cell (seeded)', async () => {
    const seed = Number(process.env.KERNELWARDEN_CUTS_SEED ?? randomBytes(4).readUInt32LE(0));
    console.log(`200 cuts: seed ${seed} (KERNELWARDEN_CUTS_SEED=${seed} replays the cut moments)`);
    const random = prng(seed);
    const proxy = await cuttableProxy(Number(new URL(ticket.baseUrl).port));
    const stop = join(testGateway().root, `stop-${randomBytes(4).toString('hex')}`);
    try {
      const client = new GatewayClient({ baseUrl: proxy.baseUrl, token: ticket.token, ownership: ticket.ownership });
      await using kernel = await GatewayKernel.start({
        gateway: client,
        reconnect: { attempts: 20, initialDelayMs: 20, maxDelayMs: 500 },
      });
      let reconnected = 0;
      kernel.on('reconnected', () => {
        reconnected++;
      });
      let seen = '';
      // Prints 0, 1, 2, … until the test is done cutting.
      const code = `import os, time\ni = 0\nwhile not os.path.exists(${JSON.stringify(stop)}):\n    print(i, flush=True)\n    i += 1\n    time.sleep(0.003)`;
      const running = kernel.execute(code, {
        onOutput: (output) => {
          if (output.type === 'stream') seen += output.text;
        },
      });
      let cuts = 0;
      let open = Promise.resolve();
      kernel.on('reconnecting', () => {
        open = new Promise((resolve) => {
          const off = kernel.on('reconnected', () => {
            off();
            resolve();
          });
        });
      });
      // Each cut at a random moment (0-120 ms) after the socket is open again: mid-output, mid-replay from the
      // journal, mid-read of it (its HTTP requests name the kernel too, and are cut with it).
      while (cuts < 200 && kernel.isAlive()) {
        await open;
        await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * 120)));
        if (proxy.cut(kernel.id) > 0) cuts++;
      }
      expect(cuts, `seed ${seed}`).toBe(200);
      // Some output after the last cut, then the cell ends.
      const before = seen.length;
      const until = Date.now() + 60_000;
      while (seen.length === before && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
      writeFileSync(stop, '');
      const result = await running;
      expect(reconnected, `seed ${seed}`).toBeGreaterThan(0);
      expect(result.status, `seed ${seed}`).toBe('ok');
      expect(result.outputDropped, `seed ${seed}`).toBeFalsy();
      expect(seen, `seed ${seed}`).toBe(result.stdout);
      expect(consecutive(result.stdout), `seed ${seed}`).toBeGreaterThan(100);
    } finally {
      rmSync(stop, { force: true });
      await proxy.close();
    }
  }, 600_000);
});

describe('a socket cut mid-cell on the embedded gateway without journals', () => {
  let ticket: LocalGatewayTicket;

  beforeAll(async () => {
    const stateDir = join(testGateway().root, `journal-off-${randomBytes(4).toString('hex')}`);
    mkdirSync(stateDir, { recursive: true });
    ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool: {}, journal: { enabled: false } });
  });
  afterAll(async () => {
    await ticket?.release();
  });

  it('offers no journal, and flags what the server could not replay: lines missing only with outputDropped', async () => {
    const proxy = await cuttableProxy(Number(new URL(ticket.baseUrl).port));
    try {
      const client = new GatewayClient({ baseUrl: proxy.baseUrl, token: ticket.token, ownership: ticket.ownership });
      await using kernel = await GatewayKernel.start({ gateway: client });
      expect(kernelJournalCapability(await client.getKernel(kernel.id))).toBeUndefined();
      let seen = '';
      let cuts = 0;
      const result = await kernel.execute(CELL, {
        onOutput: (output) => {
          if (output.type !== 'stream') return;
          seen += output.text;
          if ((cuts === 0 && seen.includes('\n300\n')) || (cuts === 1 && seen.includes('\n700\n'))) {
            cuts++;
            proxy.cut(kernel.id);
          }
        },
      });
      expect(cuts).toBe(2);
      const lines = result.stdout.split('\n').filter((l) => l !== '');
      // What arrived is in order and once each; whatever is missing is said.
      expect(lines.map(Number)).toEqual([...lines.map(Number)].sort((a, b) => a - b));
      expect(new Set(lines).size).toBe(lines.length);
      if (result.stdout !== EXPECTED) expect(result.outputDropped).toBe(true);
    } finally {
      await proxy.close();
    }
  });
});

describe('a socket cut mid-cell when the journal no longer holds what it missed', () => {
  let ticket: LocalGatewayTicket;

  beforeAll(async () => {
    const stateDir = join(testGateway().root, `journal-small-${randomBytes(4).toString('hex')}`);
    mkdirSync(stateDir, { recursive: true });
    ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool: {}, journal: { maxBytes: 16 * 1024 } });
  });
  afterAll(async () => {
    await ticket?.release();
  });

  it('says which numbers were lost (journal-lost) and flags the cell outputDropped, never silent', async () => {
    const proxy = await cuttableProxy(Number(new URL(ticket.baseUrl).port));
    try {
      // Reads of the journal answer late: meanwhile the cell prints far past the journal's 16 KiB.
      const slowJournal: typeof fetch = async (input, init) => {
        if (String(input instanceof Request ? input.url : input).includes('/journal')) {
          await new Promise((resolve) => setTimeout(resolve, 3_000));
        }
        return fetch(input, init);
      };
      const client = new GatewayClient({
        baseUrl: proxy.baseUrl,
        token: ticket.token,
        ownership: ticket.ownership,
        fetch: slowJournal,
      });
      await using kernel = await GatewayKernel.start({ gateway: client });
      const losses: { from: [number, number]; to: [number, number] }[] = [];
      kernel.on('journal-lost', (event) => {
        losses.push(event);
      });
      let cut = false;
      const code =
        "import time\nfor i in range(3000):\n    print(str(i) + 'y' * 100, flush=True)\n    time.sleep(0.001)";
      const result = await kernel.execute(code, {
        onOutput: (output) => {
          if (!cut && output.type === 'stream' && output.text.includes('50y')) {
            cut = true;
            proxy.cut(kernel.id);
          }
        },
      });
      expect(cut).toBe(true);
      expect(losses.length).toBeGreaterThan(0);
      const [first] = losses;
      expect(first?.from[0]).toBe(1);
      expect(first && first.to[1] >= first.from[1]).toBe(true);
      expect(result.outputDropped).toBe(true);
    } finally {
      await proxy.close();
    }
  }, 240_000);
});
