#!/usr/bin/env node
// Isolation benchmark: what limits add to a kernel's start. On an embedded LocalGateway of its own (a temp state
// directory, removed at the end), the time from `GatewayKernel.start()` until the kernel is ready (create, channels,
// kernel_info_reply), median of N starts each, taken in turns:
//   start.plain         python3 as installed, no sandbox
//   start.sandbox       python3 in the limits-only sandbox without limits (createKernelPolicy({}))
//   start.limits        the same sandbox with memoryBytes, maxProcesses, cpuSeconds and network: false
// and, once per spec, the install (sandbox check, limit detection, probe, spec written):
//   install.sandbox, install.limits
// Ratio lines (`unit: "x"`) compare start.limits with start.sandbox and with start.plain. Goal: start.limits within
// 1.1x start.sandbox (what the limits themselves cost at launch: a cgroup made, set and joined, prlimit).
//
// Needs the built packages (`npx turbo run build --filter=@kernelwarden/isolation...`), jupyter-server with ipykernel
// (KERNELWARDEN_JUPYTER_SERVER chooses it, as for the tests) and bubblewrap. KW_BENCH_URL is not used: limits need a
// local gateway's kernelspec directory. KW_LIMITS_BENCH_RUNS: starts per variant (10).
// Prints one JSON line per figure on stdout: {"name","median","min","max","unit"}; progress goes to stderr.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway } from '@kernelwarden/local-gateway';
import { createKernelPolicy, detectLimits, prepareIsolatedKernel, removeIsolatedKernelSpecs } from '../dist/index.js';

const RUNS = Math.max(3, Number(process.env.KW_LIMITS_BENCH_RUNS) || 10);
const MiB = 1024 * 1024;
const log = (message) => process.stderr.write(`[isolation bench] ${message}\n`);

function summarize(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return { median, min: sorted[0], max: sorted[sorted.length - 1] };
}

const round = (x, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;

function emit(name, samples, unit = 'ms') {
  const { median, min, max } = summarize(samples);
  process.stdout.write(`${JSON.stringify({ name, median: round(median), min: round(min), max: round(max), unit })}\n`);
  return median;
}

const root = mkdtempSync(join(tmpdir(), 'kw-limits-bench-'));
const workspace = mkdtempSync(join(root, 'ws-'));
let ticket;
const installed = [];
let cleaning;

async function cleanup() {
  cleaning ??= (async () => {
    if (ticket) {
      try {
        const res = await fetch(`${ticket.baseUrl}/api/kernels`, {
          headers: { Authorization: `token ${ticket.token}` },
        });
        const kernels = res.ok ? await res.json() : [];
        removeIsolatedKernelSpecs({
          kernelSpecDir: ticket.kernelSpecDir,
          names: installed,
          inUse: kernels.map((k) => k.name),
        });
      } finally {
        await ticket.release();
      }
    }
    rmSync(root, { recursive: true, force: true });
  })();
  return cleaning;
}
process.on('SIGTERM', () => {
  void cleanup().finally(() => process.exit(143));
});
process.on('SIGINT', () => {
  void cleanup().finally(() => process.exit(130));
});

async function startOnce(kernelName) {
  const t0 = performance.now();
  const kernel = await GatewayKernel.start({ gateway: ticket, kernelName, startupTimeoutMs: 60_000 });
  const ms = performance.now() - t0;
  const { confirmed } = await kernel.shutdown();
  if (!confirmed) throw new Error(`kernel ${kernel.id} did not confirm its shutdown`);
  return ms;
}

try {
  // No warm pool: every start here is a cold one, so a limited kernel is compared with a plain cold start.
  ticket = await LocalGateway.acquire({ stateDir: join(root, 'state'), lingerMs: 0, pool: {} });
  const support = await detectLimits({ pid: ticket.pid });
  for (const [limit, status] of Object.entries(support.limits)) log(`${limit}: ${status.detail}`);
  const limits = {
    memoryBytes: 1024 * MiB,
    cpuSeconds: 3600,
    network: false,
    ...(support.limits.maxProcesses.enforceable ? { maxProcesses: 256 } : {}),
  };
  const install = async (policy) => {
    const t0 = performance.now();
    const name = await prepareIsolatedKernel({ gateway: ticket, policy, workspace, hide: [ticket.stateDir] });
    installed.push(name);
    return { name, ms: performance.now() - t0 };
  };
  const sandbox = await install(createKernelPolicy({}));
  const limited = await install(createKernelPolicy(limits));
  emit('install.sandbox', [sandbox.ms]);
  emit('install.limits', [limited.ms]);

  // One warm-up start each (imports, page cache), then turns, so load on a shared machine falls on all alike.
  const variants = { plain: 'python3', sandbox: sandbox.name, limits: limited.name };
  for (const name of Object.values(variants)) await startOnce(name);
  const samples = { plain: [], sandbox: [], limits: [] };
  for (let run = 0; run < RUNS; run++) {
    for (const [variant, kernelName] of Object.entries(variants)) samples[variant].push(await startOnce(kernelName));
    log(`turn ${run + 1}/${RUNS}`);
  }
  const medians = {};
  for (const [variant, values] of Object.entries(samples)) medians[variant] = emit(`start.${variant}`, values);
  const ratio = (a, b) => {
    const per = samples[a].map((v, i) => v / samples[b][i]);
    const { median, min, max } = summarize(per);
    process.stdout.write(
      `${JSON.stringify({ name: `start.${a}_over_${b}`, median: round(median, 3), min: round(min, 3), max: round(max, 3), unit: 'x' })}\n`,
    );
  };
  ratio('limits', 'sandbox');
  ratio('limits', 'plain');
  log(`medians: ${JSON.stringify(medians)}`);
} finally {
  await cleanup();
}
