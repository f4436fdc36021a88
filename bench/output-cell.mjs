// Child process: runs one big-output scenario with one Node client and prints one JSON line
// `{ times, rssBaselineMB, rssPeakOverBaselineMB, bytes, inOrder, outputDropped }`.
// Usage: node --expose-gc bench/output-cell.mjs <client> <scenario> <reps> [cellTimeoutMs], with KW_BENCH_URL /
// KW_BENCH_TOKEN. A cell that outlives cellTimeoutMs prints `{ partial: true, bytes, lines, … }` and exits 3.
import './quiet-console.mjs';
import { readFileSync, writeFileSync } from 'node:fs';
import { CLIENTS } from './clients/catalog.mjs';
import { LineOrder } from './line-order.mjs';
import { OUTPUT_SCENARIOS } from './output-scenarios.mjs';

function statusKb(field) {
  const match = readFileSync('/proc/self/status', 'utf8').match(new RegExp(`^${field}:\\s+(\\d+)`, 'm'));
  return match ? Number(match[1]) : 0;
}

function resetPeakRss() {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
  } catch {
    // not Linux, or not allowed: the peak then includes start-up
  }
}

const [clientKey, scenarioKey, repsArg, timeoutArg] = process.argv.slice(2);
const client = CLIENTS[clientKey];
const scenario = OUTPUT_SCENARIOS[scenarioKey];
if (!client || !scenario) {
  console.error(
    `usage: output-cell.mjs <${Object.keys(CLIENTS).join('|')}> <${Object.keys(OUTPUT_SCENARIOS).join('|')}> <reps>`,
  );
  process.exit(2);
}
const reps = Number(repsArg ?? 3);
const cellTimeoutMs = Number(timeoutArg ?? scenario.timeoutMs);
const kernel = await client.start({ baseUrl: process.env.KW_BENCH_URL, token: process.env.KW_BENCH_TOKEN });
const progress = { partial: true, bytes: 0, lines: 0, order: 'in order', elapsedMs: 0, started: 0, baselineKb: 0 };
function reportProgress() {
  const { started, baselineKb, ...rest } = progress;
  const elapsedMs = started ? performance.now() - started : 0;
  const rssPeakOverBaselineMB = started ? Math.max(0, statusKb('VmHWM') - baselineKb) / 1024 : undefined;
  process.stdout.write(`${JSON.stringify({ ...rest, elapsedMs, rssPeakOverBaselineMB })}\n`);
}
// A cell that outlives its time limit: report how far it got, delete the kernel, exit 3.
const cellTimer = setTimeout(() => {
  reportProgress();
  kernel.close().finally(() => process.exit(3));
  setTimeout(() => process.exit(3), 10_000).unref();
}, cellTimeoutMs);
cellTimer.unref();
// run.mjs's own (later) SIGTERM: the same, as far as it can.
process.once('SIGTERM', () => {
  reportProgress();
  kernel.close().finally(() => process.exit(143));
  setTimeout(() => process.exit(143), 10_000).unref();
});
try {
  await kernel.run('1');
  const result = {
    times: [],
    rssBaselineMB: [],
    rssPeakOverBaselineMB: [],
    bytes: [],
    inOrder: [],
    order: [],
    outputDropped: [],
    stderr: [],
  };
  for (let i = 0; i < reps; i++) {
    let bytes = 0;
    const order = new LineOrder();
    globalThis.gc?.();
    const baseline = statusKb('VmRSS');
    resetPeakRss();
    const start = performance.now();
    progress.started = start;
    progress.baselineKb = baseline;
    cellTimer.refresh();
    const reply = await kernel.run(scenario.code, {
      onText: (text, name) => {
        if (name !== 'stdout') {
          // The cells print to stdout only: anything else (a kernel or server warning) is reported, not counted.
          progress.stderr ??= text.slice(0, 200);
          return;
        }
        bytes += text.length;
        progress.bytes = bytes;
        if (scenario.expectLines) {
          order.feed(text);
          progress.lines = order.count;
          progress.order = order.describe();
        }
      },
    });
    const ms = performance.now() - start;
    const peak = statusKb('VmHWM');
    if (reply.status !== 'ok') throw new Error(`cell ended with status ${reply.status}`);
    result.times.push(ms);
    result.rssBaselineMB.push(baseline / 1024);
    result.rssPeakOverBaselineMB.push(Math.max(0, peak - baseline) / 1024);
    result.bytes.push(bytes);
    if (scenario.expectLines) {
      result.inOrder.push(order.complete(scenario.expectLines));
      result.order.push(order.describe());
    }
    result.outputDropped.push(reply.outputDropped === true);
    if (progress.stderr) result.stderr.push(progress.stderr);
    progress.stderr = undefined;
  }
  clearTimeout(cellTimer);
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  await kernel.close();
}
