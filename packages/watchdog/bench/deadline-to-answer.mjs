#!/usr/bin/env node
// Watchdog benchmark: on a real jupyter-server, the time from a cell's deadline to the kernel answering
// its next cell, for an interruptible cell (`time.sleep(100)`) and a SIGINT-ignoring spin, median of 5 each.
// Goal: within interrupt grace + kill grace + 1.5 s.
//
// Needs the built packages (`npx turbo run build --filter=@kernelwarden/watchdog...`) and a server:
//   KW_BENCH_URL, KW_BENCH_TOKEN      the jupyter-server (127.0.0.1) and its token
//   KW_WATCHDOG_BENCH_RUNS            samples per cell (5)
//   KW_WATCHDOG_BENCH_BUDGET_MS       the cell budget (1000)
//   KW_WATCHDOG_BENCH_INTERRUPT_GRACE_MS (2000), KW_WATCHDOG_BENCH_KILL_GRACE_MS (10000, the policy default)
// Prints one JSON line per figure on stdout: {"name","median","min","max","unit"}; progress goes to stderr.
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { KernelSupervisor } from '@kernelwarden/supervisor';
import { createWatchdog } from '../dist/index.js';

const baseUrl = process.env.KW_BENCH_URL;
const token = process.env.KW_BENCH_TOKEN;
if (!baseUrl) {
  process.stderr.write('watchdog bench: set KW_BENCH_URL (and KW_BENCH_TOKEN) to a jupyter-server\n');
  process.exit(2);
}
const numberFromEnv = (name, fallback) => {
  const value = Number(process.env[name]);
  return Number.isFinite(value) && value > 0 ? value : fallback;
};
const RUNS = numberFromEnv('KW_WATCHDOG_BENCH_RUNS', 5);
const BUDGET_MS = numberFromEnv('KW_WATCHDOG_BENCH_BUDGET_MS', 1_000);
const INTERRUPT_GRACE_MS = numberFromEnv('KW_WATCHDOG_BENCH_INTERRUPT_GRACE_MS', 2_000);
const KILL_GRACE_MS = numberFromEnv('KW_WATCHDOG_BENCH_KILL_GRACE_MS', 10_000);

const CELLS = [
  { name: 'interruptible', code: 'import time\ntime.sleep(100)' },
  { name: 'sigint_ignoring', code: 'import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass' },
];

const log = (message) => process.stderr.write(`[watchdog bench] ${message}\n`);

function summarize(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return { median, min: sorted[0], max: sorted[sorted.length - 1] };
}

function emit(name, samples) {
  if (samples.length === 0) return;
  const { median, min, max } = summarize(samples);
  const round = (ms) => Math.round(ms * 10) / 10;
  process.stdout.write(
    `${JSON.stringify({ name, median: round(median), min: round(min), max: round(max), unit: 'ms' })}\n`,
  );
}

// The clock records when each timer fires: the first one to fire during a cell is its budget, i.e. the deadline.
let deadlineAt;
const clock = {
  now: () => performance.now(),
  setTimer(callback, ms) {
    const handle = setTimeout(
      () => {
        deadlineAt ??= performance.now();
        callback();
      },
      Math.max(0, ms),
    );
    return { cancel: () => clearTimeout(handle) };
  },
};

const supervisor = new KernelSupervisor();
let stopping;
const stop = () => {
  stopping ??= supervisor.shutdownAll().then(() => supervisor.settled());
  return stopping;
};
process.on('SIGTERM', () => {
  void stop().finally(() => process.exit(143));
});

const watchdog = createWatchdog({
  cellTimeoutMs: BUDGET_MS,
  interruptGraceMs: INTERRUPT_GRACE_MS,
  killGraceMs: KILL_GRACE_MS,
  clock,
});
const rungs = [];
const requestTimes = { kill: [], restart: [] };
watchdog.on('*', (event) => rungs.push(event));

try {
  const lease = await supervisor.ensure('python', 'bench', async ({ signal }) => {
    const kernel = await GatewayKernel.start({ gateway: { baseUrl, token }, signal });
    // Time the kernel's own kill and restart requests, to show where the reset's time goes.
    for (const method of ['kill', 'restart']) {
      const original = kernel[method].bind(kernel);
      kernel[method] = async (opts) => {
        const began = performance.now();
        try {
          return await original(opts);
        } finally {
          requestTimes[method].push(performance.now() - began);
        }
      };
    }
    return kernel;
  });
  log(`kernel ${lease.kernel.id} started; budget ${BUDGET_MS} ms, graces ${INTERRUPT_GRACE_MS}/${KILL_GRACE_MS} ms`);
  await watchdog.run({ supervisor, slot: 'python', code: '1' }); // warm-up

  for (const cell of CELLS) {
    const samples = [];
    for (let i = 0; i < RUNS; i++) {
      deadlineAt = undefined;
      rungs.length = 0;
      const outcome = await watchdog.run({ supervisor, slot: 'python', code: cell.code }).then(
        (result) => result.error?.ename ?? result.status,
        (error) => error.code ?? error.name,
      );
      const next = await watchdog.run({ supervisor, slot: 'python', code: '1' });
      const answeredAt = performance.now();
      if (next.status !== 'ok' || deadlineAt === undefined) throw new Error(`${cell.name}: next cell ${next.status}`);
      samples.push(answeredAt - deadlineAt);
      log(
        `${cell.name} #${i + 1}: ${outcome} via ${rungs.map((r) => r.type).join('>')}, ` +
          `deadline to next answer ${(answeredAt - deadlineAt).toFixed(0)} ms`,
      );
    }
    emit(`deadline_to_next_answer.${cell.name}`, samples);
  }
  emit('gateway_kill_request.sigint_ignoring', requestTimes.kill);
  emit('gateway_restart_request.sigint_ignoring', requestTimes.restart);
  log(
    `goal: within interrupt grace + kill grace + 1.5 s = ${INTERRUPT_GRACE_MS + KILL_GRACE_MS + 1_500} ms ` +
      '(the interruptible cell should come back within the interrupt grace)',
  );
} finally {
  await stop();
}
