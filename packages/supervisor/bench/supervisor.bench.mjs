#!/usr/bin/env node
// Supervisor benchmarks. Prints one JSON line per measurement:
//   {"name": ..., "median": ..., "min": ..., "max": ..., "unit": ..., "n": ...}
//
// - supervisor.python_ready.cold: time until a python kernel answers its first cell, built by the factory (ms)
// - supervisor.python_ready.spares: the same when `ensure` takes a started spare (ms)
// - supervisor.ensure_live: bookkeeping throughput of `ensure` on a slot whose kernel is live (ops/s)
//
// The real server: KW_BENCH_URL + KW_BENCH_TOKEN (what bench/run.mjs passes) or KERNELWARDEN_BENCH_BASE_URL +
// KERNELWARDEN_BENCH_TOKEN when set, else an embedded
// LocalGateway in a temporary state dir that is stopped at the end. Samples: KERNELWARDEN_BENCH_SAMPLES (20).
// Run after a build: `node packages/supervisor/bench/supervisor.bench.mjs`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway } from '@kernelwarden/local-gateway';
import { KernelSupervisor } from '@kernelwarden/supervisor';

const SAMPLES = Number(process.env.KERNELWARDEN_BENCH_SAMPLES ?? 20);

function summarize(name, samples, unit) {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  const round = (x) => Math.round(x * 100) / 100;
  return { name, median: round(median), min: round(sorted[0]), max: round(sorted.at(-1)), unit, n: sorted.length };
}

function print(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

async function gateway() {
  const baseUrl = process.env.KW_BENCH_URL ?? process.env.KERNELWARDEN_BENCH_BASE_URL;
  if (baseUrl) {
    const token = process.env.KW_BENCH_TOKEN ?? process.env.KERNELWARDEN_BENCH_TOKEN;
    return { gateway: { baseUrl, ...(token ? { token } : {}) }, close: async () => {} };
  }
  const stateDir = mkdtempSync(join(tmpdir(), 'kw-supervisor-bench-'));
  const ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0 });
  return {
    gateway: { baseUrl: ticket.baseUrl, token: ticket.token, ownership: ticket.ownership },
    close: async () => {
      await ticket.release();
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

async function main() {
  const { gateway: gw, close } = await gateway();
  const factory = ({ signal }) => GatewayKernel.start({ gateway: gw, kernelName: 'python3', signal });
  const sup = new KernelSupervisor();
  try {
    // Cold: the factory starts a kernel on the critical path.
    const cold = [];
    for (let i = 0; i < SAMPLES; i++) {
      const t0 = performance.now();
      const lease = await sup.ensure('python', 'cold', factory);
      await lease.kernel.execute('pass');
      cold.push(performance.now() - t0);
      await sup.stop('python');
    }
    print(summarize('supervisor.python_ready.cold', cold, 'ms'));

    // Spares: a started spare is handed over; its refill happens between samples, off the clock.
    sup.configureSpares('python', 'spare', factory, { size: 1 });
    const spare = [];
    for (let i = 0; i < SAMPLES; i++) {
      await sup.sparesReady('python', 'spare');
      const t0 = performance.now();
      const lease = await sup.ensure('python', 'spare', factory);
      await lease.kernel.execute('pass');
      spare.push(performance.now() - t0);
      await sup.stop('python');
    }
    await sup.drainSpares('python');
    print(summarize('supervisor.python_ready.spares', spare, 'ms'));

    // Bookkeeping: ensure on a live slot (a fake kernel, so only the supervisor is measured).
    const fake = {
      id: 'fake',
      isAlive: () => true,
      interrupt: async () => ({ delivered: true }),
      shutdown: async () => ({ confirmed: true }),
    };
    const local = new KernelSupervisor();
    await local.ensure('python', 'k', () => fake);
    const rates = [];
    const N = 100_000;
    for (let round = 0; round < 7; round++) {
      const t0 = performance.now();
      for (let i = 0; i < N; i++) await local.ensure('python', 'k', () => fake);
      rates.push(N / ((performance.now() - t0) / 1000));
    }
    await local.shutdownAll();
    print(summarize('supervisor.ensure_live', rates, 'ops/s'));
  } finally {
    await sup.shutdownAll();
    await sup.settled();
    await close();
  }
}

main().catch((error) => {
  process.stderr.write(`supervisor bench failed: ${error?.stack ?? error}\n`);
  process.exitCode = 1;
});
