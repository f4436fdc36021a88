#!/usr/bin/env node
// MCP benchmark: a `run_code` round trip for the cell `1` through the MCP protocol over stdio (the SDK's Client and
// StdioClientTransport, this script as the server process), against `GatewayKernel.execute('1')` straight on a
// kernel, on the same jupyter-server. Goal: the MCP median within 1.5x the direct one.
//
// Needs the built packages (`npx turbo run build --filter=@kernelwarden/mcp...`) and a server:
//   KW_BENCH_URL, KW_BENCH_TOKEN      the jupyter-server (127.0.0.1) and its token
//   KW_MCP_BENCH_CELLS                cells per client (200)
// Both clients run warm, in alternating turns of 10 back-to-back cells, so that load on a shared machine falls on
// both alike. Prints one JSON line per figure on stdout: {"name","median","min","max","unit"}; progress goes to
// stderr. Run with `--serve` it is the MCP server (stdout is the protocol).
import { fileURLToPath } from 'node:url';
import { GatewayClient, GatewayKernel } from '@kernelwarden/gateway-client';
import { KernelSession } from '@kernelwarden/supervisor';
import { createWatchdog } from '@kernelwarden/watchdog';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { createMcpServer, McpStdioTransport } from '../dist/index.js';

const baseUrl = process.env.KW_BENCH_URL;
const token = process.env.KW_BENCH_TOKEN;
if (!baseUrl) {
  process.stderr.write('mcp bench: set KW_BENCH_URL (and KW_BENCH_TOKEN) to a jupyter-server\n');
  process.exit(2);
}
const gateway = new GatewayClient({ baseUrl, ...(token ? { token } : {}) });
const log = (message) => process.stderr.write(`[mcp bench] ${message}\n`);

if (process.argv.includes('--serve')) {
  // The server side: the tools on a session with the watchdog, as `kernelwarden mcp` composes them.
  const session = new KernelSession({
    python: ({ signal }) => GatewayKernel.start({ gateway, signal }),
    executor: createWatchdog({ cellTimeoutMs: 0 }),
  });
  const server = createMcpServer({ session, defaultTimeoutMs: 60_000 });
  const done = () => void session.close().finally(() => process.exit(0));
  process.stdin.on('end', done);
  process.on('SIGTERM', done);
  await server.connect(new McpStdioTransport());
} else {
  const CELLS = Math.max(10, Number(process.env.KW_MCP_BENCH_CELLS) || 200);
  const TURN = 10;
  const summarize = (samples) => {
    const sorted = [...samples].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
    return { median, min: sorted[0], max: sorted[sorted.length - 1] };
  };
  const round = (x) => Math.round(x * 100) / 100;
  const emit = (name, samples) => {
    const { median, min, max } = summarize(samples);
    process.stdout.write(
      `${JSON.stringify({ name, median: round(median), min: round(min), max: round(max), unit: 'ms' })}\n`,
    );
    return median;
  };

  const kernel = await GatewayKernel.start({ gateway });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [fileURLToPath(import.meta.url), '--serve'],
    env: { ...process.env },
    stderr: 'inherit',
  });
  const client = new Client({ name: 'mcp-bench', version: '0' });
  try {
    await client.connect(transport);
    const direct = async () => {
      const started = performance.now();
      const result = await kernel.execute('1');
      if (result.status !== 'ok') throw new Error(`direct cell failed: ${result.status}`);
      return performance.now() - started;
    };
    const viaMcp = async () => {
      const started = performance.now();
      const result = await client.callTool({ name: 'run_code', arguments: { code: '1' } });
      if (result.isError) throw new Error(`run_code failed: ${JSON.stringify(result.content)}`);
      return performance.now() - started;
    };
    // Warm both: the MCP side starts its kernel on the first call.
    for (let i = 0; i < 10; i++) {
      await direct();
      await viaMcp();
    }
    const samples = { direct: [], mcp: [] };
    for (let done = 0; done < CELLS; done += TURN) {
      for (let i = 0; i < TURN; i++) samples.direct.push(await direct());
      for (let i = 0; i < TURN; i++) samples.mcp.push(await viaMcp());
    }
    const directMedian = emit('gateway_kernel_execute', samples.direct);
    const mcpMedian = emit('run_code_roundtrip', samples.mcp);
    log(`run_code / GatewayKernel.execute medians: ${(mcpMedian / directMedian).toFixed(2)}x (goal <= 1.5x)`);
  } finally {
    await client.close().catch(() => {});
    await kernel.shutdown();
  }
}
