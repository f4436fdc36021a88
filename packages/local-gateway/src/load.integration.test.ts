import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { GatewayClient, GatewayKernel } from '@kernelwarden/gateway-client';
import { mixedCells, testGateway } from '@kernelwarden/test-env';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_POOL, LocalGateway, type LocalGatewayTicket } from './index.js';

/** Sessions started at once (`KERNELWARDEN_LOAD_SESSIONS` lowers it while developing on a shared machine). */
const SESSIONS = Number(process.env.KERNELWARDEN_LOAD_SESSIONS ?? 64);
const CELLS = 20;
/** Generous: 64 interpreters booting on two cores, then 1,280 cells. */
const BOUND_MS = 15 * 60_000;

const tickets: LocalGatewayTicket[] = [];
const stateDirs: string[] = [];
afterEach(async () => {
  for (const ticket of tickets.splice(0)) await ticket.release().catch(() => {});
  for (const stateDir of stateDirs.splice(0)) await LocalGateway.stop({ stateDir, stopTimeoutMs: 2_000 });
});

describe(`${SESSIONS} sessions started at once on the embedded gateway, default options`, () => {
  it(
    `every start succeeds and each of ${CELLS} mixed cells per session has the right result`,
    async () => {
      const stateDir = join(testGateway().root, `load-${randomBytes(4).toString('hex')}`);
      mkdirSync(stateDir, { recursive: true });
      stateDirs.push(stateDir);
      // Default options; the warm pool as a user gets it (the integration project turns it off by default).
      const ticket = await LocalGateway.acquire({ stateDir, pool: { ...DEFAULT_POOL }, lingerMs: 0 });
      tickets.push(ticket);
      const startMs: number[] = [];
      const outcomes = await Promise.all(
        Array.from({ length: SESSIONS }, async (_, session) => {
          const began = performance.now();
          const kernel = await GatewayKernel.start({ gateway: ticket }).catch((error: unknown) => error as Error);
          startMs.push(performance.now() - began);
          if (kernel instanceof Error) return { session, start: `${kernel.name}: ${kernel.message}`, wrong: [] };
          const wrong: string[] = [];
          try {
            for (const [j, cell] of mixedCells(session, CELLS).entries()) {
              const why = cell.wrong(await kernel.execute(cell.code, { timeoutMs: 120_000 }));
              if (why) wrong.push(`cell ${j} (${cell.kind}): ${why}`);
            }
          } finally {
            await kernel.shutdown();
          }
          return { session, start: undefined, wrong };
        }),
      );
      startMs.sort((a, b) => a - b);
      console.log(
        `${SESSIONS} starts: median ${Math.round(startMs[Math.floor(SESSIONS / 2)] ?? 0)} ms, slowest ${Math.round(startMs.at(-1) ?? 0)} ms`,
      );
      expect(outcomes.filter((o) => o.start !== undefined)).toEqual([]);
      expect(outcomes.filter((o) => o.wrong.length > 0)).toEqual([]);
      const client = new GatewayClient(ticket);
      // Only the warm pool's kernels remain.
      const left = (await client.listKernels()).length;
      expect(left).toBeLessThanOrEqual(DEFAULT_POOL.python3 ?? 0);
    },
    BOUND_MS,
  );
});
