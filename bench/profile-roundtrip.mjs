#!/usr/bin/env node
// Where a client spends its CPU on a trivial cell: starts a no-delay jupyter-server (no stall to wait through), one
// warm kernel for the client, runs N `1` cells under the V8 sampling profiler and prints the functions with the most
// self time, grouped by file. For the gateway-client engineer when the round trip misses its goal.
// Usage: node bench/profile-roundtrip.mjs [kernelwarden|jupyterlab|minimal] [cells=1000] [--server stock]
import './quiet-console.mjs';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CLIENTS } from './clients/catalog.mjs';
import { NODELAY_CONFIG, startServer } from './jupyter-servers.mjs';

const [key = 'kernelwarden', cellsArg = '1000'] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const stock = process.argv.includes('--server') && process.argv[process.argv.indexOf('--server') + 1] === 'stock';
const cells = Number(cellsArg);
const root = mkdtempSync(join(tmpdir(), 'kw-profile-'));
const server = await startServer({
  name: stock ? 'stock' : 'no-delay',
  root,
  args: stock ? [] : [`--config=${NODELAY_CONFIG}`],
});
const session = new Session();
let client;
try {
  client = await CLIENTS[key].start(server);
  for (let i = 0; i < 50; i++) await client.run('1');
  // First pass without the profiler (its sampling thread costs CPU too), then the profiled pass.
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < cells; i++) await client.run('1');
  const wall = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 250 });
  await session.post('Profiler.start');
  for (let i = 0; i < cells; i++) await client.run('1');
  const { profile } = await session.post('Profiler.stop');
  const file = join(tmpdir(), `kw-profile-${key}.cpuprofile`);
  writeFileSync(file, JSON.stringify(profile));

  // Self time per node, from the sample counts.
  const counts = new Map();
  for (const id of profile.samples) counts.set(id, (counts.get(id) ?? 0) + 1);
  const byFunction = new Map();
  let total = 0;
  for (const node of profile.nodes) {
    const n = counts.get(node.id) ?? 0;
    const { functionName, url, lineNumber } = node.callFrame;
    if (!n || functionName === '(idle)' || functionName === '(program)') continue;
    total += n;
    const where = url ? `${url.replace(/^file:\/\//, '').replace(/.*\/node_modules\//, '~/')}:${lineNumber + 1}` : '';
    const name = `${functionName || '(anonymous)'} ${where}`.trim();
    byFunction.set(name, (byFunction.get(name) ?? 0) + n);
  }
  const top = [...byFunction.entries()].sort((a, b) => b[1] - a[1]).slice(0, 25);
  process.stdout.write(
    `${key} on ${server.name}: ${cells} cells, wall ${(wall / cells).toFixed(2)} ms/cell, ` +
      `client CPU ${((cpu.user + cpu.system) / 1000 / cells).toFixed(3)} ms/cell; profile in ${file}\n` +
      `self time, as a share of the samples where the client was busy (idle and V8's "(program)" left out):\n`,
  );
  for (const [name, n] of top) process.stdout.write(`${((100 * n) / total).toFixed(1).padStart(6)}%  ${name}\n`);
} finally {
  session.disconnect();
  await client?.close().catch(() => {});
  await server.stop();
  rmSync(root, { recursive: true, force: true });
}
