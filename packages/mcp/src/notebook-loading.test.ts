import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// The notebook package is loaded on a notebook tool's first call, not with the server.

const DIST = resolve(dirname(fileURLToPath(import.meta.url)), '../dist/index.js');
const SUPERVISOR = import.meta.resolve('@kernelwarden/supervisor');
/** The module URLs of the notebook package's entry: in the workspace, or installed. */
const ENTRY = String.raw`(@kernelwarden|packages)\/notebook(\/dist\/index\.js)?$`;
const RESOLVE_HOOK = `data:text/javascript,${encodeURIComponent(
  `export async function resolve(specifier, context, next) { const r = await next(specifier, context); if (/${ENTRY}/.test(r.url)) process.stderr.write('LOADED\\n'); return r; }`,
)}`;
/** Reports `LOADED` on stderr when the process loads @kernelwarden/notebook, by require() or by import. */
const WATCH = `data:text/javascript,${encodeURIComponent(
  "import Module, { register } from 'node:module';" +
    `register(${JSON.stringify(RESOLVE_HOOK)});` +
    'const load = Module._load;' +
    `Module._load = function (request, ...rest) { if (/${ENTRY}/.test(String(request))) process.stderr.write('LOADED\\n'); return load.call(this, request, ...rest); };`,
)}`;

const dir = mkdtempSync(join(tmpdir(), 'kw-mcp-nb-loading-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Builds a server on a session whose kernel never starts, lists its tools, then calls `tool` (if any). */
function serve(tool?: { name: string; arguments: Record<string, unknown> }) {
  const script = `
import { createMcpServer } from ${JSON.stringify(DIST)};
import { KernelSession } from ${JSON.stringify(SUPERVISOR)};
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
const session = new KernelSession({ python: () => { throw new Error('no kernel here'); } });
const server = createMcpServer({ session, cwd: ${JSON.stringify(dir)} });
const [a, b] = InMemoryTransport.createLinkedPair();
const client = new Client({ name: 't', version: '0' });
await server.connect(b);
await client.connect(a);
await client.listTools();
process.stderr.write('LISTED\\n');
${tool ? `const r = await client.callTool(${JSON.stringify(tool)}); process.stderr.write(JSON.stringify(r.content) + '\\n');` : ''}
await client.close();
await server.close();
await session.close();
`;
  const ran = spawnSync(process.execPath, ['--import', WATCH, '--input-type=module', '-e', script], {
    cwd: resolve(dirname(fileURLToPath(import.meta.url)), '..'),
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: ran.status, stderr: ran.stderr };
}

describe('@kernelwarden/notebook is loaded on a notebook tool call only', () => {
  it('not by creating the server and listing its tools; by save_notebook', () => {
    const listed = serve();
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stderr).toContain('LISTED');
    expect(listed.stderr).not.toContain('LOADED');
    const saved = serve({ name: 'save_notebook', arguments: { output_path: 'empty.ipynb' } });
    expect(saved.code, saved.stderr).toBe(0);
    expect(saved.stderr).toMatch(/LISTED\nLOADED\n.*Saved 0 Python cells/);
  });
});
