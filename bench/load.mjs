// The load section of `pnpm bench` (`--only load`): N sessions started at once, each running 20 mixed cells
// (assignments, 10 kB prints, short sleeps, exceptions, arithmetic), for N = 8, 32 and 64 — kernelwarden's GatewayKernel
// on the embedded gateway (LocalGateway, default options) beside @jupyterlab/services on a stock jupyter-server.
// Each session's cells are checked; a failed start or a wrong cell is counted, never retried.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { JupyterLabClient } from './clients/jupyterlab.mjs';
import { loadGatewayKernel } from './clients/kernelwarden.mjs';

const LOCAL_GATEWAY_DIST = new URL('../packages/local-gateway/dist/index.js', import.meta.url);
const PRINT_BYTES = 10_000;
const SLEEP_S = 0.05;

/** The cells of session `s`: each depends on the session's own earlier ones, so a lost or crossed cell shows. */
export function loadCells(s, count = 20) {
  const cells = [];
  const base = s * 1000;
  for (let j = 0; j < count; j++) {
    const value = base + j;
    switch (j % 5) {
      case 0:
        cells.push({ code: `v = ${value}`, right: (r) => r.status === 'ok' && r.stdout === '' });
        break;
      case 1:
        cells.push({
          code: `print(f"{v}:" + "x" * ${PRINT_BYTES})`,
          right: (r) => r.status === 'ok' && r.stdout === `${value - 1}:${'x'.repeat(PRINT_BYTES)}\n`,
        });
        break;
      case 2:
        cells.push({ code: `import time\ntime.sleep(${SLEEP_S})\nv = v + 1`, right: (r) => r.status === 'ok' });
        break;
      case 3:
        cells.push({
          code: `raise ValueError(f"s${s} c${j} v={v}")`,
          right: (r) => r.status === 'error' && r.ename === 'ValueError' && r.evalue === `s${s} c${j} v=${value - 2}`,
        });
        break;
      default:
        cells.push({ code: 'v * 3 + 7', right: (r) => r.status === 'ok' && r.value === String((value - 3) * 3 + 7) });
    }
  }
  return cells;
}

/** `p`-th percentile (nearest rank) of `samples`. */
function percentile(samples, p) {
  if (samples.length === 0) return undefined;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** Resident set (kB) of `pid` and every process below it. */
function treeRssKb(pid) {
  const parents = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(Number(entry), ppid);
    } catch {
      // gone
    }
  }
  const inTree = (p) => {
    for (let q = p, hops = 0; q > 1 && hops < 64; q = parents.get(q) ?? 0, hops++) if (q === pid) return true;
    return false;
  };
  let kb = 0;
  for (const p of parents.keys()) {
    if (!inTree(p)) continue;
    try {
      const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'));
      kb += m ? Number(m[1]) : 0;
    } catch {
      // gone
    }
  }
  return kb;
}

/** A GatewayKernel session: its results normalised for `loadCells`. */
async function kernelwardenSession(GatewayKernel, ticket) {
  const kernel = await GatewayKernel.start({ gateway: ticket });
  return {
    async run(code) {
      const r = await kernel.execute(code);
      const value = r.outputs.find((o) => o.type === 'execute_result')?.data?.['text/plain'];
      return { status: r.status, stdout: r.stdout, ename: r.error?.ename, evalue: r.error?.evalue, value };
    },
    close: () => kernel.shutdown(),
  };
}

/** An @jupyterlab/services session on `manager`: its results normalised the same way. */
async function jupyterlabSession(manager) {
  const kernel = await manager.startNew({ name: 'python3' });
  await kernel.info;
  return {
    async run(code) {
      let stdout = '';
      let value;
      const future = kernel.requestExecute({ code, stop_on_error: false });
      future.onIOPub = (msg) => {
        if (msg.header.msg_type === 'stream' && msg.content.name === 'stdout') stdout += msg.content.text;
        if (msg.header.msg_type === 'execute_result') value = msg.content.data['text/plain'];
      };
      const reply = await future.done;
      return { status: reply.content.status, stdout, ename: reply.content.ename, evalue: reply.content.evalue, value };
    },
    async close() {
      await kernel.shutdown();
      kernel.dispose();
    },
  };
}

/** A session's start and each of its cells are capped: a client that hangs is counted, not waited for. */
const START_CAP_MS = 180_000;
const CELL_CAP_MS = 60_000;
const CLOSE_CAP_MS = 30_000;

/** `promise`, or a rejection once `ms` have passed (the timer is cleared either way). */
function capped(promise, ms, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** Runs `sessions` sessions at once with `open()`; returns the row's figures. */
async function burst({ sessions, open, serverPid, log, label }) {
  const baselineRss = process.memoryUsage().rss;
  const serverBefore = treeRssKb(serverPid);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const startMs = [];
  const cellMs = [];
  let startFailures = 0;
  let wrongCells = 0;
  let cellsDone = 0;
  let hungCells = 0;
  const errors = new Map();
  const opened = [];
  let lastCell = t0;
  await Promise.all(
    Array.from({ length: sessions }, async (_, s) => {
      let session;
      const opening = open();
      try {
        session = await capped(opening, START_CAP_MS, 'the start');
        startMs.push(performance.now() - t0);
      } catch (error) {
        // A start that answers after its cap is still closed.
        opening.then((late) => capped(late.close(), CLOSE_CAP_MS, 'the close')).catch(() => {});
        startFailures++;
        const key = String(error?.message ?? error).slice(0, 120);
        errors.set(key, (errors.get(key) ?? 0) + 1);
        return;
      }
      opened.push(session);
      const cells = loadCells(s);
      for (const [index, cell] of cells.entries()) {
        const began = performance.now();
        let hung = false;
        try {
          const result = await capped(session.run(cell.code), CELL_CAP_MS, 'a cell');
          if (!cell.right(result)) wrongCells++;
        } catch (error) {
          wrongCells++;
          hung = /did not finish within/.test(String(error?.message));
        }
        cellMs.push(performance.now() - began);
        cellsDone++;
        lastCell = performance.now();
        if (hung) {
          // The session's later cells would queue behind the hung one: counted wrong, not run.
          hungCells++;
          wrongCells += cells.length - index - 1;
          break;
        }
      }
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  // Every session idle now: what the client and the server (with its kernels) hold per session.
  const clientRss = process.memoryUsage().rss - baselineRss;
  const serverAfter = treeRssKb(serverPid);
  const idle = opened.length;
  await Promise.all(opened.map((session) => capped(session.close(), CLOSE_CAP_MS, 'the close').catch(() => {})));
  if (hungCells) log(`load ${label} x${sessions}: ${hungCells} sessions had a cell hang past ${CELL_CAP_MS / 1000} s`);
  const wallS = (lastCell - t0) / 1000;
  if (errors.size)
    log(`load ${label} x${sessions}: start failures ${[...errors].map(([m, n]) => `${n}x ${m}`).join('; ')}`);
  return {
    startP50: percentile(startMs, 50),
    startP99: percentile(startMs, 99),
    cellP50: percentile(cellMs, 50),
    cellP99: percentile(cellMs, 99),
    cellsPerS: wallS > 0 ? cellsDone / wallS : undefined,
    cpuMsPerSession: (cpu.user + cpu.system) / 1000 / sessions,
    clientRssMbPerSession: idle ? clientRss / 1024 / 1024 / idle : undefined,
    serverRssMbPerKernel: idle ? (serverAfter - serverBefore) / 1024 / idle : undefined,
    failures: `${startFailures} starts, ${wrongCells} cells${hungCells ? ` (${hungCells} sessions hung)` : ''}`,
  };
}

function fmt(v, digits = 0) {
  return typeof v === 'number' && Number.isFinite(v) ? v.toFixed(digits) : '—';
}

/**
 * The load section: for each size, kernelwarden on a fresh embedded gateway (default options, its Python kernels
 * exec'd, then the same with `launcher: 'fork'`; each server stopped after), then @jupyterlab/services on `stock`.
 * Returns a section with its own table.
 */
export async function loadSection({ root, stock, sizes = [8, 32, 64], log, crashed }) {
  const GatewayKernel = await loadGatewayKernel();
  const { LocalGateway } = await import(LOCAL_GATEWAY_DIST.href);
  const body = [];
  for (const sessions of sizes) {
    // The embedded gateway twice: its Python kernels exec'd, then forked from a launcher (the default).
    for (const launcher of ['exec', 'fork']) {
      const stateDir = join(root, `load-gateway-${launcher}-${sessions}`);
      try {
        log(`load: ${sessions} kernelwarden sessions on the embedded gateway, launcher ${launcher}`);
        const ticket = await LocalGateway.acquire({ stateDir, lingerMs: 0, launcher });
        try {
          // The warm pool fills before the burst, as on a gateway that has been up a while.
          await new Promise((r) => setTimeout(r, 3_000));
          const r = await burst({
            sessions,
            open: () => kernelwardenSession(GatewayKernel, ticket),
            serverPid: ticket.pid,
            log,
            label: `kernelwarden (${launcher})`,
          });
          body.push([
            'kernelwarden (GatewayKernel)',
            `embedded (LocalGateway), launcher ${launcher === 'fork' ? 'fork (default)' : 'exec'}`,
            sessions,
            r,
          ]);
        } finally {
          await ticket.release();
          await LocalGateway.stop({ stateDir, stopTimeoutMs: 5_000 });
        }
      } catch (error) {
        crashed('kernelwarden', `load x${sessions} (launcher ${launcher})`, error);
      }
    }
    try {
      log(`load: ${sessions} @jupyterlab/services sessions on the stock server`);
      const manager = await JupyterLabClient.manager(stock);
      try {
        const r = await burst({
          sessions,
          open: () => jupyterlabSession(manager),
          serverPid: stock.pid,
          log,
          label: 'jupyterlab',
        });
        body.push(['@jupyterlab/services 7.6.6', stock.name, sessions, r]);
      } finally {
        manager.dispose();
      }
    } catch (error) {
      crashed('jupyterlab', `load x${sessions}`, error);
    }
  }
  const head = [
    'client',
    'server',
    'sessions',
    'start p50 (ms)',
    'start p99 (ms)',
    'cell p50 (ms)',
    'cell p99 (ms)',
    'cells/s',
    'client CPU / session (ms)',
    'client RSS / session (MB)',
    'server+kernel RSS / idle kernel (MB)',
    'failures',
  ];
  return {
    id: 'load',
    title: `Load: N sessions started at once, 20 mixed cells each (assignments, ${PRINT_BYTES / 1000} kB prints, ${SLEEP_S * 1000} ms sleeps, exceptions, arithmetic), every cell checked`,
    table: {
      head,
      body: body.map(([client, server, sessions, r]) => [
        client,
        server,
        String(sessions),
        fmt(r.startP50),
        fmt(r.startP99),
        fmt(r.cellP50, 1),
        fmt(r.cellP99, 1),
        fmt(r.cellsPerS, 1),
        fmt(r.cpuMsPerSession, 1),
        fmt(r.clientRssMbPerSession, 2),
        fmt(r.serverRssMbPerKernel, 1),
        r.failures,
      ]),
    },
    rows: body.map(([client, server, sessions, r]) => ({ client, server, sessions, ...r })),
  };
}
