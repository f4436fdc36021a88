#!/usr/bin/env node
// kernelwarden's benchmark suite (`pnpm bench`). Starts its own jupyter-servers on 127.0.0.1 — "stock", "no-delay"
// (the same server with TCP_NODELAY on the kernel WebSocket, bench/nodelay/jupyter_server_config.py) and "raised"
// (LocalGateway's own jupyter_server_config.py, for the big-output cells: iopub rate limits raised and the iopub ZMQ
// high-water mark lifted) — and compares kernelwarden's GatewayKernel with
// @jupyterlab/services 7.6.6, a minimal `ws` v1 client and jupyter_client over ZMQ (the kernel's own floor).
// Prints a table, writes bench/results.json (and bench/results.md); `--update-readme` puts the table in README.md.
// Not a test: no asserts, but it exits non-zero when a client crashes.
//
// Options: --rounds N (300), --only a,b (sections: import, roundtrip, coldstart, interrupt, output [= output-20mb,
//          output-lines], packages, load, journal: the kernel journal on vs off), --load-sizes 8,32,64 (sessions at once in the load section),
//          --imports N (15: fresh processes per package in the import section), --cli-runs N (10: warm CLI runs),
//          --back-to-back N (20: CLI runs one after the other, the pool refilling as it can),
//          --cold N (10), --interrupts N (5), --output-reps N (3), --output-timeout SECONDS (per scenario: 120 / 180),
//          --update-readme, --keep (keep the temp dir).
import './quiet-console.mjs';
import { spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { CLIENTS, ZMQ_FLOOR_LABEL } from './clients/catalog.mjs';
import { JupyterLabClient } from './clients/jupyterlab.mjs';
import { loadGatewayKernel, loadLocalGatewayServerConfig } from './clients/kernelwarden.mjs';
import { journalSection } from './journal.mjs';
import { listKernels, NODELAY_CONFIG, processesMentioning, startServer } from './jupyter-servers.mjs';
import { loadSection } from './load.mjs';
import { describeMachine, machineLine } from './machine.mjs';
import { OUTPUT_SCENARIOS } from './output-scenarios.mjs';
import { renderMarkdown, renderText, updateReadme } from './report.mjs';
import { summarize } from './statistics.mjs';
import { ZmqFloor, zmqOutputCell } from './zmq-floor.mjs';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '300' },
    only: { type: 'string' },
    cold: { type: 'string', default: '10' },
    interrupts: { type: 'string', default: '5' },
    imports: { type: 'string', default: '15' },
    'cli-runs': { type: 'string', default: '10' },
    'back-to-back': { type: 'string', default: '20' },
    'output-reps': { type: 'string', default: '3' },
    'output-timeout': { type: 'string' },
    'load-sizes': { type: 'string', default: '8,32,64' },
    'update-readme': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const ROUNDS = Number(args.rounds);
const COLD = Number(args.cold);
const INTERRUPTS = Number(args.interrupts);
const OUTPUT_REPS = Number(args['output-reps']);
const IMPORTS = Number(args.imports);
const CLI_RUNS = Number(args['cli-runs']);
const BACK_TO_BACK = Number(args['back-to-back']);
const WARMUP = 20;
const BLOCK = 10;
const PACKAGE_BENCH_TIMEOUT_MS = 180_000;
const sections = new Set(
  (args.only ?? 'import,cli,roundtrip,coldstart,interrupt,output,packages,load,journal')
    .split(',')
    .map((s) => s.trim()),
);

const REPO = new URL('..', import.meta.url).pathname;
const root = mkdtempSync(join(tmpdir(), 'kw-bench-'));
const crashes = [];
const results = { date: new Date().toISOString(), machine: describeMachine(), settings: {}, sections: [], crashes };
results.settings = {
  rounds: ROUNDS,
  warmup: WARMUP,
  cold: COLD,
  interrupts: INTERRUPTS,
  outputReps: OUTPUT_REPS,
  imports: IMPORTS,
  cliRuns: CLI_RUNS,
};
const servers = [];
const children = new Set();
const began = performance.now();

function log(msg) {
  const s = ((performance.now() - began) / 1000).toFixed(0).padStart(4);
  process.stderr.write(`[bench ${s}s] ${msg}\n`);
}

function crashed(client, where, error) {
  const message = error instanceof Error ? error.message : String(error);
  crashes.push({ client, where, message });
  log(`CRASH ${client} in ${where}: ${message}`);
}

function row(client, server, samples, extra = {}) {
  return { client, server, ...summarize(samples), unit: 'ms', ...extra };
}

/** Starts every client that can start; a client that cannot is recorded as crashed and left out. */
async function startClients(keys, server, where) {
  const started = [];
  for (const key of keys) {
    try {
      started.push({ key, server, client: await CLIENTS[key].start(server) });
    } catch (error) {
      crashed(key, `${where} start (${server.name})`, error);
    }
  }
  return started;
}

async function closeAll(entries) {
  await Promise.all(entries.map((e) => e.client.close().catch((error) => log(`close ${e.key}: ${error.message}`))));
}

function rotate(list, by) {
  const k = list.length ? by % list.length : 0;
  return [...list.slice(k), ...list.slice(0, k)];
}

// --- 1. Round trip of a trivial cell, alternated, one warm kernel per client ----------------------------------
async function roundTrip(stock, nodelay) {
  const keys = ['kernelwarden', 'kernelwarden-nopong', 'jupyterlab', 'minimal', 'minimal-pong'];
  log(`round trip: starting ${keys.length} clients on each of stock and no-delay, and the ZMQ floor`);
  const entries = [
    ...(await startClients(keys, stock, 'roundtrip')),
    ...(await startClients(keys, nodelay, 'roundtrip')),
  ];
  let floor;
  try {
    try {
      floor = await ZmqFloor.start({ dir: join(root, 'zmq-floor'), warmup: WARMUP });
    } catch (error) {
      crashed('zmq-floor', 'roundtrip start', error);
    }
    const samples = new Map(entries.map((e) => [e, []]));
    // Client CPU per cell: only one client is active at a time, so the process's CPU time during a cell is that
    // client's (plus idle clients' timers). Unlike wall time it barely moves with the machine's load.
    const cpu = new Map(entries.map((e) => [e, []]));
    const floorSamples = [];
    const floorCpu = [];
    let live = [...entries];
    const runOne = async (entry, record) => {
      const cpu0 = process.cpuUsage();
      const start = performance.now();
      const reply = await entry.client.run('1');
      const ms = performance.now() - start;
      const used = process.cpuUsage(cpu0);
      if (reply.status !== 'ok') throw new Error(`cell status ${reply.status}`);
      if (record) {
        samples.get(entry).push(ms);
        cpu.get(entry).push((used.user + used.system) / 1000);
      }
    };
    for (const entry of live) {
      try {
        for (let i = 0; i < WARMUP; i++) await runOne(entry, false);
      } catch (error) {
        crashed(entry.key, `roundtrip warm-up (${entry.server.name})`, error);
        live = live.filter((e) => e !== entry);
      }
    }
    log(`round trip: ${ROUNDS} rounds over ${live.length + (floor ? 1 : 0)} clients`);
    // Clients take turns in blocks of BLOCK back-to-back cells (one unrecorded lead-in cell first). Turns of one cell
    // each would leave every connection idle for longer than TCP's minimum RTO (200 ms) between its cells, and Linux
    // answers the first data after such a gap with an immediate ACK (quick-ack mode): the delayed-ACK stall that every
    // real, back-to-back session on a stock server pays would then vanish from the figures.
    const blocks = Math.ceil(ROUNDS / BLOCK);
    for (let block = 0; block < blocks; block++) {
      const cellsThisBlock = Math.min(BLOCK, ROUNDS - block * BLOCK);
      for (const entry of rotate([...live, 'floor'], block)) {
        if (entry === 'floor') {
          if (!floor) continue;
          try {
            await floor.cell();
            for (let i = 0; i < cellsThisBlock; i++) {
              const { ms, cpuMs } = await floor.cell();
              floorSamples.push(ms);
              floorCpu.push(cpuMs);
            }
          } catch (error) {
            crashed('zmq-floor', 'roundtrip', error);
            floor = undefined;
          }
          continue;
        }
        try {
          await runOne(entry, false);
          for (let i = 0; i < cellsThisBlock; i++) await runOne(entry, true);
        } catch (error) {
          crashed(entry.key, `roundtrip (${entry.server.name})`, error);
          live = live.filter((e) => e !== entry);
        }
      }
      if (((block + 1) * BLOCK) % 100 === 0) log(`round trip: ${(block + 1) * BLOCK}/${ROUNDS}`);
    }
    const floorRow = floorSamples.length
      ? row(ZMQ_FLOOR_LABEL, 'none (ZMQ)', floorSamples, { key: 'zmq-floor', cpuMs: summarize(floorCpu).median })
      : undefined;
    const rows = [];
    for (const server of [stock, nodelay]) {
      const jlab = entries.find((e) => e.server === server && e.key === 'jupyterlab');
      const jlabMedian = jlab ? summarize(samples.get(jlab))?.median : undefined;
      for (const entry of entries.filter((e) => e.server === server)) {
        const s = samples.get(entry);
        if (s.length === 0) continue;
        const r = row(CLIENTS[entry.key].label, server.name, s, {
          key: entry.key,
          complete: s.length === ROUNDS,
          cpuMs: summarize(cpu.get(entry)).median,
        });
        r.ratio = floorRow ? r.median / floorRow.median : undefined;
        r.ratioToJupyterlab = jlabMedian ? r.median / jlabMedian : undefined;
        rows.push(r);
      }
    }
    if (floorRow) {
      floorRow.ratio = 1;
      rows.push(floorRow);
    }
    results.sections.push({
      id: 'roundtrip',
      title: `Trivial cell \`1\` round trip (until execute_reply and status idle), ${ROUNDS} cells each, alternated in turns of ${BLOCK} back-to-back cells, one warm python3 kernel per client`,
      reference: ZMQ_FLOOR_LABEL,
      ratioColumns: ['ratio', 'ratioToJupyterlab'],
      extraColumns: ['cpuMs'],
      rows,
    });
    results.goals = [...(results.goals ?? []), ...goals(rows)];
  } finally {
    await closeAll(entries);
    if (floor) await floor.close().catch((error) => crashed('zmq-floor', 'roundtrip close', error));
  }
}

/** The bench's goals: kernelwarden on stock <= 1.2x the ZMQ floor; never above @jupyterlab/services on either server. */
function goals(rows) {
  const find = (key, server) => rows.find((r) => r.key === key && r.server === server);
  const floor = rows.find((r) => r.key === 'zmq-floor');
  const out = [];
  const kwStock = find('kernelwarden', 'stock');
  if (kwStock && floor) {
    const ratio = kwStock.median / floor.median;
    out.push({ goal: 'kernelwarden median on stock <= 1.2x the ZMQ floor', value: ratio, met: ratio <= 1.2 });
  } else out.push({ goal: 'kernelwarden median on stock <= 1.2x the ZMQ floor', value: null, met: false });
  for (const server of ['stock', 'no-delay']) {
    const kw = find('kernelwarden', server);
    const jl = find('jupyterlab', server);
    const ratio = kw && jl ? kw.median / jl.median : null;
    out.push({
      goal: `kernelwarden median <= @jupyterlab/services on ${server}`,
      value: ratio,
      met: ratio !== null && ratio <= 1,
    });
  }
  return out;
}

const CLI_BIN = new URL('../packages/cli/dist/bin.cjs', import.meta.url).pathname;

/** How the embedded gateways of this run start Python kernels: `KERNELWARDEN_LAUNCHER`, else the default, fork. */
const LAUNCHER = process.env.KERNELWARDEN_LAUNCHER === 'exec' ? 'exec' : 'fork';
results.settings.launcher = LAUNCHER;

function launchWords() {
  return LAUNCHER === 'fork'
    ? 'Python kernels forked from a launcher, the default launcher'
    : "Python kernels exec'd, KERNELWARDEN_LAUNCHER=exec";
}

/**
 * Runs `node argv` to its exit (SIGTERM after `timeoutMs`, when given); resolves with how it ended, its stdout, the
 * last `tailChars` of its stderr and the wall time from spawn to exit. Never rejects.
 */
function spawnNode(argv, { env, cwd, timeoutMs, tailChars = 2000 }) {
  return new Promise((resolve) => {
    const start = performance.now();
    const child = spawn(process.execPath, argv, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr = (stderr + d).slice(-tailChars);
    });
    let timedOut = false;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            child.kill('SIGTERM');
          }, timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      resolve({ code, signal, stdout, stderr, timedOut, ms: performance.now() - start });
    });
  });
}

/** The last lines of a child's stderr, for an error message. */
function stderrTail(stderr) {
  return stderr.trim().split('\n').slice(-3).join(' | ');
}

/** Runs `node argv` to its exit; resolves with the wall time from spawn to exit and its stdout, rejects on failure. */
async function timedNode(argv, env) {
  const { code, stdout, stderr, ms } = await spawnNode(argv, { env, cwd: REPO });
  if (code !== 0) throw new Error(`node ${argv.join(' ')} exited ${code}: ${stderrTail(stderr)}`);
  return { ms, stdout };
}

// --- 0. Import cost of every package, each in a fresh node ------------------------------------------------------
/** The published packages, by directory, in dependency order (the CLI last). */
const IMPORTED_PACKAGES = [
  'core',
  'jupyter-protocol',
  'gateway-client',
  'local-gateway',
  'supervisor',
  'watchdog',
  'r-kernel',
  'isolation',
  'mcp',
  'testkit',
  'cli',
];
const JUPYTERLAB_IMPORT = '@jupyterlab/services';

async function importOnce(target) {
  const { stdout } = await timedNode([new URL('./import-cost.mjs', import.meta.url).pathname, target], process.env);
  const ms = Number(stdout.trim());
  if (!Number.isFinite(ms)) throw new Error(`import of ${target} printed ${JSON.stringify(stdout)}`);
  return ms;
}

async function importCost() {
  const targets = [
    ...IMPORTED_PACKAGES.map((dir) => ({
      key: dir,
      label: `@kernelwarden/${dir}`,
      target: new URL(`../packages/${dir}/dist/index.js`, import.meta.url).href,
    })),
    { key: 'jupyterlab', label: `${JUPYTERLAB_IMPORT} 7.6.6`, target: JUPYTERLAB_IMPORT },
  ];
  log(`import: ${targets.length} packages, ${IMPORTS} fresh processes each, alternated`);
  const samples = new Map(targets.map((t) => [t, []]));
  let live = [...targets];
  for (let i = 0; i < IMPORTS; i++) {
    for (const t of rotate(live, i)) {
      try {
        samples.get(t).push(await importOnce(t.target));
      } catch (error) {
        crashed(t.label, 'import', error);
        live = live.filter((x) => x !== t);
      }
    }
  }
  const jlab = summarize(samples.get(targets.at(-1)));
  const rows = targets
    .filter((t) => samples.get(t).length > 0)
    .map((t) => {
      const r = row(t.label, 'none', samples.get(t), { key: t.key });
      r.ratio = jlab ? r.median / jlab.median : undefined;
      return r;
    });
  results.sections.push({
    id: 'import',
    title: `Import cost: \`await import(package)\` in a fresh \`node\`, median of ${IMPORTS} processes per package, alternated`,
    reference: `${JUPYTERLAB_IMPORT} 7.6.6`,
    ratioColumns: ['ratio'],
    rows,
  });
  const gc = rows.find((r) => r.key === 'gateway-client');
  const value = gc && jlab ? gc.median / jlab.median : null;
  results.goals = [
    ...(results.goals ?? []),
    {
      goal: `import of @kernelwarden/gateway-client <= 0.35x ${JUPYTERLAB_IMPORT}'s`,
      value,
      met: value !== null && value <= 0.35,
    },
  ];
}

// --- 0b. A warm CLI run: the embedded gateway running, its pool filled; then back-to-back runs ----------------------
async function warmCliRun() {
  const stateDir = join(root, 'cli-state');
  const env = { ...process.env, KERNELWARDEN_STATE_DIR: stateDir };
  delete env.KERNELWARDEN_POOL; // the default pool: one python3 kernel
  // KERNELWARDEN_LAUNCHER, when set, chooses how the CLI gateway's kernels start (the report says which).
  const { LocalGateway } = await import(new URL('../packages/local-gateway/dist/index.js', import.meta.url).href);
  const poolReady = async () => {
    const until = Date.now() + 60_000;
    while ((await LocalGateway.status({ stateDir })).pool.python3?.ready !== 1) {
      if (Date.now() > until) throw new Error('the warm pool of the CLI gateway did not fill');
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  log(
    `warm CLI run: ${CLI_RUNS} runs of kernelwarden run -c 'print(1)' and of node -e 0, alternated; then ${BACK_TO_BACK} back to back`,
  );
  const samples = { cli: [], node: [], backToBack: [] };
  const cliRun = async () => {
    const { ms, stdout } = await timedNode([CLI_BIN, 'run', '-c', 'print(1)'], env);
    if (stdout !== '1\n') throw new Error(`kernelwarden run printed ${JSON.stringify(stdout)}`);
    return ms;
  };
  try {
    await timedNode([CLI_BIN, 'gateway', 'start'], env);
    await poolReady();
    await timedNode([CLI_BIN, 'run', '-c', 'print(1)'], env); // warm-up: the OS caches, the pool's refill path
    for (let i = 0; i < CLI_RUNS; i++) {
      for (const key of rotate(['cli', 'node'], i)) {
        // Both wait for the pool's refill to end: a kernel starting beside either would slow it down.
        await poolReady();
        if (key === 'node') {
          samples.node.push((await timedNode(['-e', '0'], env)).ms);
          continue;
        }
        samples.cli.push(await cliRun());
      }
    }
    // One run right after the other, as a script or an agent makes them: the pool refills only as fast as it can
    // (from each claim on), so a run finding it empty starts its kernel.
    await poolReady();
    for (let i = 0; i < BACK_TO_BACK; i++) samples.backToBack.push(await cliRun());
  } catch (error) {
    crashed('kernelwarden run', 'warm CLI run', error);
  } finally {
    await timedNode([CLI_BIN, 'gateway', 'stop'], env).catch((error) => log(`gateway stop: ${error.message}`));
  }
  const node = summarize(samples.node);
  const rows = [];
  const ratios = (r) => {
    r.ratio = node ? r.median / node.median : undefined;
    r.p90Ratio = node ? r.p90 / node.median : undefined;
    return r;
  };
  if (samples.cli.length) {
    rows.push(
      ratios(
        row(
          "kernelwarden run -c 'print(1)' (gateway running, pool refilled before each run)",
          'embedded',
          samples.cli,
          {
            key: 'cli-warm',
          },
        ),
      ),
    );
  }
  if (samples.backToBack.length === BACK_TO_BACK) {
    rows.push(
      ratios(
        row(`${BACK_TO_BACK} back-to-back \`kernelwarden run -c 'print(1)'\``, 'embedded', samples.backToBack, {
          key: 'cli-back-to-back',
        }),
      ),
    );
  }
  if (node)
    rows.push({
      ...row('node -e 0', 'none', samples.node, { key: 'node' }),
      ratio: 1,
      p90Ratio: node.p90 / node.median,
    });
  results.sections.push({
    id: 'cli',
    title: `A warm CLI run, process spawn to exit, median of ${CLI_RUNS} alternated with \`node -e 0\`, each after the pool refilled; then ${BACK_TO_BACK} runs back to back, no pause between them (the default pool of one, its refill starting at each claim; ${launchWords()}). Ratios are over node -e 0's median`,
    reference: 'node -e 0',
    ratioColumns: ['ratio', 'p90Ratio'],
    extraColumns: ['p90'],
    rows,
  });
  const warm = rows.find((r) => r.key === 'cli-warm')?.ratio ?? null;
  const b2b = rows.find((r) => r.key === 'cli-back-to-back');
  results.goals = [
    ...(results.goals ?? []),
    { goal: "warm kernelwarden run -c 'print(1)' <= 3x node -e 0", value: warm, met: warm !== null && warm <= 3 },
    {
      goal: `${BACK_TO_BACK} back-to-back kernelwarden run: median <= 3x node -e 0`,
      value: b2b?.ratio ?? null,
      met: b2b !== undefined && b2b.ratio <= 3,
    },
    {
      goal: `${BACK_TO_BACK} back-to-back kernelwarden run: p90 <= 4x node -e 0`,
      value: b2b?.p90Ratio ?? null,
      met: b2b !== undefined && b2b.p90Ratio <= 4,
    },
  ];
}

// --- 2. Cold start to a usable kernel ---------------------------------------------------------------------------
async function coldStart(stock) {
  log(`cold start: ${COLD} each, alternated`);
  const manager = await JupyterLabClient.manager(stock);
  // The embedded gateway with its pool off: each start is a kernel start there (forked or exec'd: see launchWords).
  const { LocalGateway } = await import(new URL('../packages/local-gateway/dist/index.js', import.meta.url).href);
  const embeddedState = join(root, 'start-state');
  const ticket = await LocalGateway.acquire({ stateDir: embeddedState, pool: {}, lingerMs: 0 }).catch((error) => {
    crashed('embedded gateway', 'cold start', error);
    return undefined;
  });
  const starters = {
    kernelwarden: () => CLIENTS.kernelwarden.start(stock),
    jupyterlab: () => JupyterLabClient.start({ ...stock, manager }),
    // Through its ticket, as LocalGateway's users start kernels on it (the ticket's server rolls back a create its
    // requester gave up on itself: no create guard); on the stock server, GatewayKernel with its defaults.
    ...(ticket ? { embedded: () => CLIENTS.kernelwarden.start({ gateway: ticket }) } : {}),
  };
  const samples = Object.fromEntries(Object.keys(starters).map((k) => [k, []]));
  let live = Object.keys(starters);
  try {
    for (let i = 0; i < COLD; i++) {
      for (const key of rotate(live, i)) {
        const start = performance.now();
        let client;
        try {
          client = await starters[key]();
          samples[key].push(performance.now() - start);
        } catch (error) {
          crashed(key, 'cold start', error);
          live = live.filter((k) => k !== key);
        } finally {
          await client?.close().catch((error) => log(`close ${key}: ${error.message}`));
        }
      }
    }
  } finally {
    manager.dispose();
    await ticket?.release().catch((error) => log(`embedded gateway release: ${error.message}`));
    await LocalGateway.stop({ stateDir: embeddedState }).catch((error) =>
      log(`embedded gateway stop: ${error.message}`),
    );
  }
  const jlab = summarize(samples.jupyterlab);
  const onStock = summarize(samples.kernelwarden);
  const rows = Object.entries(samples)
    .filter(([, s]) => s.length > 0)
    .map(([key, s]) => {
      const r =
        key === 'embedded'
          ? row('embedded gateway start, pool off (GatewayKernel, through the ticket)', 'embedded', s, { key })
          : row(CLIENTS[key].label, 'stock', s, { key });
      r.ratio = jlab ? r.median / jlab.median : undefined;
      r.ratioToStock = onStock ? r.median / onStock.median : undefined;
      return r;
    });
  const embedded = rows.find((r) => r.key === 'embedded');
  results.goals = [
    ...(results.goals ?? []),
    {
      goal: "embedded gateway start, pool off <= 0.25x the stock server's start (GatewayKernel on both)",
      value: embedded?.ratioToStock ?? null,
      met: embedded !== undefined && embedded.ratioToStock <= 0.25,
    },
  ];
  results.sections.push({
    id: 'coldstart',
    title: `Cold start to a usable python3 kernel (create until the first kernel_info_reply), median of ${COLD}; the embedded gateway's with its pool off (${launchWords()})`,
    reference: CLIENTS.jupyterlab.label,
    ratioColumns: ['ratio', 'ratioToStock'],
    rows,
  });
}

// --- 3. Interrupt latency ---------------------------------------------------------------------------------------
async function interruptLatency(stock, nodelay) {
  log(`interrupt: ${INTERRUPTS} each (after one warm-up interrupt) on stock and no-delay`);
  const keys = ['kernelwarden', 'jupyterlab', 'minimal'];
  const rows = [];
  for (const server of [stock, nodelay]) {
    const entries = await startClients(keys, server, 'interrupt');
    try {
      for (const entry of entries) {
        const s = [];
        try {
          for (let i = 0; i <= INTERRUPTS; i++) {
            const cell = entry.client.run('import time; time.sleep(60)');
            cell.catch(() => {});
            await new Promise((r) => setTimeout(r, 400)); // the kernel is warm: the cell is sleeping by now
            const start = performance.now();
            await entry.client.interrupt();
            const reply = await cell;
            const ms = performance.now() - start;
            if (reply.status === 'ok') throw new Error('the interrupted cell ended ok');
            if (i > 0) s.push(ms); // the first interrupt of a kernel is slower (signal handler set-up)
          }
        } catch (error) {
          crashed(entry.key, `interrupt (${server.name})`, error);
          continue;
        }
        rows.push(row(CLIENTS[entry.key].label, server.name, s, { key: entry.key }));
      }
    } finally {
      await closeAll(entries);
    }
  }
  for (const r of rows) {
    const jl = rows.find((x) => x.key === 'jupyterlab' && x.server === r.server);
    r.ratio = jl ? r.median / jl.median : undefined;
  }
  results.sections.push({
    id: 'interrupt',
    title: `Interrupt latency: \`time.sleep(60)\`, POST interrupt until the cell settles, median of ${INTERRUPTS}`,
    reference: CLIENTS.jupyterlab.label,
    ratioColumns: ['ratio'],
    rows,
  });
}

// --- 4. Big outputs, each client in its own child process -------------------------------------------------------
async function runChild(argv, env, timeoutMs) {
  // A timed-out child's own kernel is deleted by the server stop at the end.
  const { code, signal, stdout, stderr, timedOut } = await spawnNode(argv, {
    env: { ...process.env, ...env },
    timeoutMs,
    tailChars: 4000,
  });
  const last = stdout.trim().split('\n').pop();
  let parsed;
  try {
    parsed = last ? JSON.parse(last) : undefined;
  } catch {
    // not JSON: handled below
  }
  // A full result counts even when the child was stopped while closing its kernel afterwards.
  if (parsed && !parsed.partial && Array.isArray(parsed.times)) return parsed;
  if (timedOut || code === 3) {
    const message = code === 3 ? 'the cell did not finish in time' : `did not finish within ${timeoutMs / 1000} s`;
    throw Object.assign(new Error(message), { timedOut: true, progress: parsed });
  }
  throw new Error(`exited ${signal ?? code}: ${stderrTail(stderr)}`);
}

async function outputCells(raised) {
  for (const [id, scenario] of Object.entries(OUTPUT_SCENARIOS)) {
    if (!sections.has('output') && !sections.has(`output-${id}`)) continue;
    const reps = scenario.reps ?? OUTPUT_REPS;
    const timeoutMs = args['output-timeout'] ? Number(args['output-timeout']) * 1000 : scenario.timeoutMs;
    log(`${scenario.title}: ${reps} rep(s) per client, each client in its own process`);
    const rows = [];
    const add = (label, key, server, r) => {
      const expectation = scenario.expectLines
        ? r.inOrder.every(Boolean)
          ? 'all lines, in order'
          : `INCOMPLETE: ${(r.order ?? []).join(', ') || 'lost or reordered'} (${r.bytes.join(', ')} chars)${r.stderr?.length ? `; stderr: ${JSON.stringify(r.stderr[0])}` : ''}`
        : r.bytes.every((b) => b === scenario.expectBytes)
          ? 'all 20 MB'
          : `INCOMPLETE (${r.bytes.join(', ')} chars)`;
      rows.push(
        row(label, server, r.times, {
          key,
          rssPeakOverBaselineMB: summarize(r.rssPeakOverBaselineMB).median,
          rssBaselineMB: summarize(r.rssBaselineMB).median,
          received: expectation,
        }),
      );
    };
    // A run that outlives its time limit is a figure ("did not finish"), not a crash.
    const unfinished = (label, key, server, error) => {
      if (!error.timedOut) return false;
      const p = error.progress;
      const got = p?.partial
        ? scenario.expectLines
          ? `: ${p.lines} lines so far (${p.order}), ${Math.round(p.lines / (p.elapsedMs / 1000))} lines/s${p.stderr ? `; stderr: ${JSON.stringify(p.stderr)}` : ''}`
          : `: ${p.bytes} chars`
        : '';
      rows.push({
        client: label,
        server,
        unit: 'ms',
        key,
        rssPeakOverBaselineMB: p?.rssPeakOverBaselineMB,
        received: `did not finish within ${timeoutMs / 1000} s${got}`,
      });
      log(`${label}: ${error.message}`);
      return true;
    };
    for (const key of scenario.clients) {
      try {
        const r = await runChild(
          [
            '--expose-gc',
            new URL('./output-cell.mjs', import.meta.url).pathname,
            key,
            id,
            String(reps),
            String(timeoutMs),
          ],
          { KW_BENCH_URL: raised.baseUrl, KW_BENCH_TOKEN: raised.token },
          // the child enforces the per-cell limit itself; this one also covers its start-up and every rep
          timeoutMs * reps + 60_000,
        );
        add(CLIENTS[key].label, key, raised.name, r);
      } catch (error) {
        if (!unfinished(CLIENTS[key].label, key, raised.name, error)) crashed(key, scenario.title, error);
      }
    }
    if (scenario.zmqFloor) {
      try {
        const r = await zmqOutputCell({
          dir: join(root, 'zmq-floor'),
          code: scenario.code,
          reps,
          expectLines: scenario.expectLines,
          timeoutMs,
        });
        add(ZMQ_FLOOR_LABEL, 'zmq-floor', 'none (ZMQ)', r);
      } catch (error) {
        if (!unfinished(ZMQ_FLOOR_LABEL, 'zmq-floor', 'none (ZMQ)', error)) crashed('zmq-floor', scenario.title, error);
      }
    }
    const jl = rows.find((r) => r.key === 'jupyterlab' && r.median !== undefined);
    for (const r of rows) r.ratio = jl && r.median !== undefined ? r.median / jl.median : undefined;
    results.sections.push({
      id: `output-${id}`,
      title: `${scenario.title} (\`${scenario.code}\`), LocalGateway's server settings (iopub rate limits raised, iopub high-water mark lifted); time and client peak RSS over its baseline${reps > 1 ? `, median of ${reps}` : ''}`,
      reference: CLIENTS.jupyterlab.label,
      ratioColumns: ['ratio'],
      extraColumns: ['rssPeakOverBaselineMB', 'received'],
      rows,
    });
  }
}

// --- 5. Other packages' bench scripts -----------------------------------------------------------------------------
async function packageBenches(stock) {
  const rows = [];
  for (const pkg of ['supervisor', 'watchdog', 'mcp', 'isolation']) {
    const dir = join(REPO, 'packages', pkg, 'bench');
    let files = [];
    try {
      files = readdirSync(dir).filter((f) => /\.(mjs|js)$/.test(f));
    } catch {
      log(`packages/${pkg}/bench: none yet`);
      continue;
    }
    for (const file of files) {
      log(`packages/${pkg}/bench/${file}`);
      try {
        const lines = await runPackageBench(join(dir, file), stock);
        for (const l of lines)
          rows.push({
            client: `${pkg}: ${l.name}`,
            server: 'stock',
            median: l.median,
            min: l.min,
            max: l.max,
            unit: l.unit ?? 'ms',
            key: `${pkg}/${file}`,
          });
      } catch (error) {
        crashed(`${pkg}/${file}`, 'package bench', error);
      }
    }
  }
  const killed = rows.find((r) => r.client === 'watchdog: kill_to_next_answer.local_gateway_pool');
  const killedStock = rows.find((r) => r.client === 'watchdog: kill_to_next_answer.stock');
  if (killed) {
    results.goals = [
      ...(results.goals ?? []),
      {
        goal: `watchdog kill on the embedded gateway, end of interrupt grace to next answer <= 600 ms${killedStock ? ` (stock server: ${Math.round(killedStock.median)} ms)` : ''}`,
        value: killed.median,
        display: `${Math.round(killed.median)} ms`,
        met: killed.median <= 600,
      },
    ];
  }
  if (rows.length)
    results.sections.push({
      id: 'packages',
      title: "Other packages' benchmarks (stock server)",
      rows,
      ratioColumns: [],
    });
}

function runPackageBench(file, stock) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file], {
      cwd: REPO,
      env: { ...process.env, KW_BENCH_URL: stock.baseUrl, KW_BENCH_TOKEN: stock.token },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    const logFile = join(root, `${basename(dirname(dirname(file)))}-${basename(file)}.stderr.log`);
    child.stderr.on('data', (d) => {
      appendFileSync(logFile, d);
      stderr = (stderr + d).slice(-4000);
    });
    const timer = setTimeout(() => child.kill('SIGTERM'), PACKAGE_BENCH_TIMEOUT_MS);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      const lines = [];
      for (const line of stdout.split('\n')) {
        try {
          const obj = JSON.parse(line);
          if (obj && typeof obj.name === 'string' && typeof obj.median === 'number') lines.push(obj);
        } catch {
          // not a result line
        }
      }
      if (code === 0) resolve(lines);
      else {
        const tail = stderr
          .trim()
          .split('\n')
          .filter((l) => l.trim() && !l.startsWith('Node.js v'));
        reject(new Error(`exited ${signal ?? code}: ${tail.slice(-4).join(' | ')} (full stderr: ${logFile})`));
      }
    });
  });
}

// --- main -----------------------------------------------------------------------------------------------------------
async function cleanUp() {
  for (const child of children) child.kill('SIGTERM');
  await Promise.all(servers.map((s) => s.stop().catch((error) => log(`stop ${s.name}: ${error.message}`))));
  for (const pid of processesMentioning(root)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  if (!args.keep && crashes.length === 0) rmSync(root, { recursive: true, force: true });
  else log(`logs kept in ${root}`);
}

let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, () => {
    interrupted = true;
    log(`${sig}: stopping servers and kernels`);
    cleanUp().finally(() => process.exit(130));
  });
}

try {
  log(machineLine(results.machine));
  if (sections.has('roundtrip') || sections.has('coldstart') || sections.has('interrupt')) {
    await loadGatewayKernel().catch((error) => log(`kernelwarden: ${error.message}`));
  }
  const [stock, nodelay, raised] = await Promise.all([
    startServer({ name: 'stock', root }),
    startServer({ name: 'no-delay', root, args: [`--config=${NODELAY_CONFIG}`] }),
    startServer({ name: 'raised', root, configPy: await loadLocalGatewayServerConfig() }),
  ]);
  servers.push(stock, nodelay, raised);
  if (!readFileSync(nodelay.logFile, 'utf8').includes('TCP_NODELAY on kernel WebSockets'))
    throw new Error(`the no-delay server did not load ${NODELAY_CONFIG}; see ${nodelay.logFile}`);
  log('servers up: stock, no-delay, raised');
  if (sections.has('import')) await importCost();
  if (sections.has('cli')) await warmCliRun();
  if (sections.has('roundtrip')) await roundTrip(stock, nodelay);
  if (sections.has('coldstart')) await coldStart(stock);
  if (sections.has('interrupt')) await interruptLatency(stock, nodelay);
  if ([...sections].some((s) => s.startsWith('output'))) await outputCells(raised);
  if (sections.has('packages')) await packageBenches(stock);
  if (sections.has('journal')) {
    results.sections.push(
      await journalSection({ root, log, rounds: Math.min(ROUNDS, 200), reps: Math.min(OUTPUT_REPS, 2) }),
    );
  }
  if (sections.has('load')) {
    const sizes = args['load-sizes'].split(',').map((n) => Number(n.trim()));
    results.sections.push(await loadSection({ root, stock, sizes, log, crashed }));
  }
  for (const server of servers) {
    const left = await listKernels(server).catch(() => []);
    if (left.length) log(`note: ${left.length} kernel(s) still listed by ${server.name}; deleting them`);
  }
} catch (error) {
  crashed('bench', 'harness', error);
} finally {
  if (!interrupted) await cleanUp();
}

results.durationS = Number(((performance.now() - began) / 1000).toFixed(1));
const text = renderText(results);
process.stdout.write(`${text}\n`);
if (args.only === undefined) {
  writeFileSync(new URL('./results.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(new URL('./results.md', import.meta.url), renderMarkdown(results));
  if (args['update-readme']) updateReadme(new URL('../README.md', import.meta.url), renderMarkdown(results));
} else {
  writeFileSync(join(tmpdir(), 'kw-bench-partial.json'), `${JSON.stringify(results, null, 2)}\n`);
  log(`partial run (--only): results in ${join(tmpdir(), 'kw-bench-partial.json')}, bench/results.json untouched`);
}
if (crashes.length) {
  log(`${crashes.length} crash(es): ${crashes.map((c) => `${c.client} (${c.where})`).join('; ')}`);
  process.exitCode = 1;
}
