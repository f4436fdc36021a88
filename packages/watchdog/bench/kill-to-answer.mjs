#!/usr/bin/env node
// Watchdog benchmark: a SIGINT-ignoring cell under the watchdog, from the end of its interrupt grace (the kernel's
// kill() is called) to the kernel answering the next cell, median of KW_WATCHDOG_BENCH_RUNS (3) each:
//   - stock: a GatewayKernel on the bench's stock jupyter-server (KW_BENCH_URL / KW_BENCH_TOKEN): the kill is the
//     server's restart, which asks the kernel to shut down, waits (jupyter's shutdown_wait_time, 5 s), kills it and
//     starts a cold kernel;
//   - local_gateway_pool: a GatewayKernel through a LocalGateway ticket with a warm pool of one python3 kernel: the
//     kill SIGKILLs the kernel's processes and moves the handle to the pooled kernel.
// The LocalGateway runs the jupyter-server KERNELWARDEN_JUPYTER_SERVER names (as the tests and the CLI do), with its
// state in a temporary directory, stopped at the end.
// Prints one JSON line per figure on stdout: {"name","median","min","max","unit"}; progress goes to stderr.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway } from '@kernelwarden/local-gateway';
import { KernelSupervisor } from '@kernelwarden/supervisor';
import { createWatchdog } from '../dist/index.js';

const baseUrl = process.env.KW_BENCH_URL;
const token = process.env.KW_BENCH_TOKEN;
const RUNS = Number(process.env.KW_WATCHDOG_BENCH_RUNS) > 0 ? Number(process.env.KW_WATCHDOG_BENCH_RUNS) : 3;
const BUDGET_MS = 500;
const INTERRUPT_GRACE_MS = 500;
const KILL_GRACE_MS = 10_000;
const SPIN = 'import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass';

const log = (message) => process.stderr.write(`[watchdog kill bench] ${message}\n`);

function emit(name, samples) {
  if (samples.length === 0) return;
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  const round = (ms) => Math.round(ms * 10) / 10;
  process.stdout.write(
    `${JSON.stringify({ name, median: round(median), min: round(sorted[0]), max: round(sorted.at(-1)), unit: 'ms' })}\n`,
  );
}

/** Runs the spin RUNS times on `gateway`; the samples run from each kill() call to the next cell's answer. */
async function measure(name, gateway, beforeEach) {
  const supervisor = new KernelSupervisor();
  const watchdog = createWatchdog({
    cellTimeoutMs: BUDGET_MS,
    interruptGraceMs: INTERRUPT_GRACE_MS,
    killGraceMs: KILL_GRACE_MS,
  });
  let killAt;
  const samples = [];
  try {
    await supervisor.ensure('python', name, async ({ signal }) => {
      const kernel = await GatewayKernel.start({ gateway, signal });
      const kill = kernel.kill.bind(kernel);
      kernel.kill = (opts) => {
        killAt = performance.now();
        return kill(opts);
      };
      return kernel;
    });
    await watchdog.run({ supervisor, slot: 'python', code: '1' });
    for (let i = 0; i < RUNS; i++) {
      await beforeEach?.();
      killAt = undefined;
      const outcome = await watchdog.run({ supervisor, slot: 'python', code: SPIN }).then(
        (r) => r.status,
        (e) => e.code ?? e.name,
      );
      const next = await watchdog.run({ supervisor, slot: 'python', code: '1' });
      const answeredAt = performance.now();
      if (next.status !== 'ok' || killAt === undefined)
        throw new Error(`${name}: ${outcome}, next cell ${next.status}`);
      samples.push(answeredAt - killAt);
      log(`${name} #${i + 1}: ${outcome}, kill to next answer ${(answeredAt - killAt).toFixed(0)} ms`);
    }
  } finally {
    await supervisor.shutdownAll();
    await supervisor.settled();
  }
  emit(`kill_to_next_answer.${name}`, samples);
}

const stateDir = mkdtempSync(join(tmpdir(), 'kw-watchdog-bench-'));
let ticket;
process.on('SIGTERM', () => {
  void LocalGateway.stop({ stateDir, stopTimeoutMs: 0 }).finally(() => process.exit(143));
});
try {
  if (baseUrl) await measure('stock', { baseUrl, token });
  else log('no KW_BENCH_URL: the stock figure is left out');
  ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0, pool: { python3: 1 } });
  // Each kill finds the pool refilled, as a kill a while after the last one does.
  const poolReady = async () => {
    const until = Date.now() + 60_000;
    while ((await LocalGateway.status({ stateDir })).pool.python3?.ready !== 1) {
      if (Date.now() > until) throw new Error('the warm pool did not fill');
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  await poolReady();
  await measure('local_gateway_pool', ticket, poolReady);
} finally {
  await ticket?.release().catch(() => {});
  await LocalGateway.stop({ stateDir, stopTimeoutMs: 2_000 }).catch(() => {});
  rmSync(stateDir, { recursive: true, force: true });
}
