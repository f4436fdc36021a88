// The kernel journal's cost: the same cells on two embedded gateways (LocalGateway) started side by side, one with
// kernel journals and one without (`journal: { enabled: false }`), alternated so that both see the same load. Rows:
// a trivial cell's round trip, a 20 MB cell, a 200,000-line flushed cell; the journal's memory (what it holds, and
// the server's RSS beside the server without journals). The machine may be shared: the load average is reported,
// and the ratios (journal on / off) are what to read.
import { mkdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { OUTPUT_SCENARIOS } from './output-scenarios.mjs';
import { summarize } from './statistics.mjs';

const GATEWAY_CLIENT = new URL('../packages/gateway-client/dist/index.js', import.meta.url);
const LOCAL_GATEWAY = new URL('../packages/local-gateway/dist/index.js', import.meta.url);
const BLOCK = 10;

function rssMB(pid) {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('VmRSS:'));
    return line ? Number(line.split(/\s+/)[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

async function timed(kernel, code) {
  const began = performance.now();
  const result = await kernel.execute(code);
  const ms = performance.now() - began;
  if (result.status !== 'ok') throw new Error(`cell ${JSON.stringify(code.slice(0, 40))} ended ${result.status}`);
  return ms;
}

/** Runs the section; returns it for results.sections. */
export async function journalSection({ root, log, rounds = 200, reps = 2 }) {
  const { GatewayKernel, GatewayClient } = await import(GATEWAY_CLIENT.href);
  const { LocalGateway } = await import(LOCAL_GATEWAY.href);
  const loadBefore = loadavg();
  const sides = [];
  try {
    for (const enabled of [true, false]) {
      const stateDir = join(root, `journal-${enabled ? 'on' : 'off'}`);
      mkdirSync(stateDir, { recursive: true });
      let pid;
      const ticket = await LocalGateway.acquire({
        stateDir,
        lingerMs: 0,
        pool: {},
        journal: { enabled },
        onEvent: (event) => {
          if (event.type === 'server-ready') pid = event.pid;
        },
      });
      const kernel = await GatewayKernel.start({ gateway: ticket });
      sides.push({ name: enabled ? 'journal on' : 'journal off', enabled, ticket, kernel, pid, samples: {} });
    }
    log(`journal: two embedded gateways up (server pids ${sides.map((s) => s.pid).join(', ')})`);
    const add = (side, id, ms) => {
      side.samples[id] ??= [];
      side.samples[id].push(ms);
    };
    for (const side of sides) for (let i = 0; i < 20; i++) await timed(side.kernel, '1');
    for (let done = 0; done < rounds; done += BLOCK) {
      for (const side of sides) for (let i = 0; i < BLOCK; i++) add(side, 'roundtrip', await timed(side.kernel, '1'));
    }
    log('journal: round trips done');
    for (let rep = 0; rep < reps; rep++) {
      for (const side of sides) add(side, '20mb', await timed(side.kernel, OUTPUT_SCENARIOS['20mb'].code));
    }
    log('journal: 20 MB cells done');
    const on = sides[0];
    const client = new GatewayClient({ baseUrl: on.ticket.baseUrl, token: on.ticket.token });
    const held = (await client.kernelJournal(on.kernel.id, { after: [1_000_000, 0] }))?.held;
    for (const side of sides) side.rssAfter20mb = rssMB(side.pid);
    for (const side of sides) add(side, 'lines', await timed(side.kernel, OUTPUT_SCENARIOS.lines.code));
    log('journal: 200,000-line cells done');
    for (const side of sides) side.rssEnd = rssMB(side.pid);
    const loadAfter = loadavg();
    const rows = [
      ['roundtrip', 'trivial cell `1` round trip', 'ms'],
      ['20mb', `20 MB cell (\`${OUTPUT_SCENARIOS['20mb'].code}\`)`, 's'],
      ['lines', `200,000-line flushed cell (\`${OUTPUT_SCENARIOS.lines.code}\`)`, 's'],
    ];
    const fmt = (v, unit) => (v === undefined ? '—' : unit === 's' ? (v / 1000).toFixed(2) : v.toFixed(2));
    const body = rows.map(([id, title, unit]) => {
      const [a, b] = sides.map((s) => summarize(s.samples[id] ?? []));
      const ratio = a && b ? `${(a.median / b.median).toFixed(2)}x` : '—';
      return [title, fmt(a?.median, unit), fmt(b?.median, unit), unit, ratio, String(a?.n ?? 0)];
    });
    const mb = (v) => (v === undefined ? '—' : v.toFixed(1));
    body.push([
      'journal held after the 20 MB cells (counted bytes / entries; bound 32 MiB)',
      held ? `${(held.bytes / 1048576).toFixed(1)} MiB / ${held.entries}` : '—',
      '—',
      '',
      '',
      '',
    ]);
    body.push(['server RSS after the 20 MB cells', mb(sides[0].rssAfter20mb), mb(sides[1].rssAfter20mb), 'MB', '', '']);
    body.push(['server RSS at the end', mb(sides[0].rssEnd), mb(sides[1].rssEnd), 'MB', '', '']);
    const load = (l) => l.map((v) => v.toFixed(2)).join(' ');
    return {
      id: 'journal',
      title: `Kernel journal on vs off: two embedded gateways in the same run, cells alternated (round trip ${rounds} cells in turns of ${BLOCK}, 20 MB cell median of ${reps}, 200,000 lines once); load average ${load(loadBefore)} before, ${load(loadAfter)} after`,
      table: {
        head: ['row', 'journal on (median)', 'journal off (median)', 'unit', 'on / off', 'n'],
        body,
      },
      rows: [],
      loadAverage: { before: loadBefore, after: loadAfter },
      held,
      samples: Object.fromEntries(sides.map((s) => [s.name, s.samples])),
    };
  } finally {
    for (const side of sides) {
      await side.kernel.shutdown().catch(() => {});
      await side.ticket.release().catch(() => {});
    }
  }
}
