import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GatewayClient, GatewayKernel } from '@kernelwarden/gateway-client';
import { createMessageTap } from '@kernelwarden/notebook';
import { KernelSession } from '@kernelwarden/supervisor';
import { testGateway } from '@kernelwarden/test-env';
import { createWatchdog } from '@kernelwarden/watchdog';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { CallToolResult, Progress } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpServer } from './mcp-server.js';

const textOf = (result: CallToolResult) =>
  result.content
    .filter((c) => c.type === 'text')
    .map((c) => (c as { text: string }).text)
    .join('\n');

const code = (source: string, tags: string[] = []) => ({
  cell_type: 'code',
  metadata: tags.length > 0 ? { tags } : {},
  source,
  execution_count: null,
  outputs: [],
});
const notebook = (cells: object[]) => ({
  nbformat: 4,
  nbformat_minor: 4,
  metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
  cells,
});

interface NbCell {
  cell_type: string;
  source: string | string[];
  metadata: { tags?: string[] };
  outputs?: { output_type: string; text?: string | string[]; ename?: string; data?: Record<string, unknown> }[];
  execution_count?: number | null;
}
const join1 = (v: string | string[] | undefined) => (Array.isArray(v) ? v.join('') : (v ?? ''));
const readNb = (path: string) => JSON.parse(readFileSync(path, 'utf8')) as { cells: NbCell[] };

describe('run_notebook and save_notebook through an MCP client on a real jupyter-server', () => {
  let dir: string;
  let session: KernelSession;
  let server: ReturnType<typeof createMcpServer>;
  let client: Client;
  const call = async (name: string, args: Record<string, unknown>, onprogress?: (p: Progress) => void) =>
    (await client.callTool({ name, arguments: args }, undefined, {
      timeout: 120_000,
      ...(onprogress ? { onprogress } : {}),
    })) as CallToolResult;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kw-mcp-nb-'));
    const { baseUrl, token } = testGateway();
    const tap = createMessageTap();
    const gateway = new GatewayClient({ baseUrl, token, WebSocket: tap.wrap() });
    session = new KernelSession({
      python: ({ signal }) => GatewayKernel.start({ gateway, signal }),
      executor: createWatchdog({ cellTimeoutMs: 0 }),
    });
    server = createMcpServer({ session, cwd: dir, notebookTap: tap });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    client = new Client({ name: 'test', version: '0' });
    await server.connect(serverSide);
    await client.connect(clientSide);
  });

  afterAll(async () => {
    await client?.close();
    await server?.close();
    await session?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists both tools', async () => {
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['run_notebook', 'save_notebook']));
  });

  it('runs a notebook with parameters in the session kernel, reports each cell as progress, and writes it', async () => {
    writeFileSync(
      join(dir, 'report.ipynb'),
      JSON.stringify(
        notebook([
          code('n = 1\nlabel = "default"', ['parameters']),
          code('print(label, n * 2)'),
          { cell_type: 'markdown', metadata: {}, source: '# done' },
          code('from IPython.display import display, clear_output\nprint("gone")\nclear_output()\nn + 40'),
        ]),
      ),
    );
    const progress: Progress[] = [];
    const result = await call('run_notebook', { path: 'report.ipynb', parameters: { n: 3, label: 'eu' } }, (p) =>
      progress.push(p),
    );
    const text = textOf(result);
    expect(result.isError, text).toBe(false);
    const written = join(dir, 'report.out.ipynb');
    expect(text).toContain(written);
    expect(text).toMatch(/\[2\] ok [\d.]+s: eu 6/);
    expect(text).toMatch(/\[4\] ok [\d.]+s: 43/);
    // Per-cell progress, counting up.
    const messages = progress.map((p) => p.message);
    expect(messages).toEqual(
      expect.arrayContaining([
        'cell 1 running',
        'cell 1 ok',
        'cell 2 running',
        'cell 2 ok',
        'cell 3 skipped (not-code)',
        'cell 4 ok',
      ]),
    );
    expect(progress.map((p) => p.progress)).toEqual([...progress.keys()].map((i) => i + 1));

    const nb = readNb(written);
    expect(nb.cells.map((c) => c.metadata.tags ?? [])).toEqual([['parameters'], ['injected-parameters'], [], [], []]);
    expect(join1(nb.cells[1]?.source)).toBe('# Parameters\nn = 3\nlabel = "eu"\n');
    expect(nb.cells[2]?.outputs).toEqual([{ output_type: 'stream', name: 'stdout', text: ['eu 6\n'] }]);
    // With the tap, clear_output is seen: only the result is left.
    expect(nb.cells[4]?.outputs?.map((o) => o.output_type)).toEqual(['execute_result']);
    expect(nb.cells.map((c) => c.execution_count ?? null)).toEqual([1, 2, 3, null, 4]);

    // The notebook ran in the session's kernel: run_code sees its variables.
    const after = await call('run_code', { code: 'n, label' });
    expect(textOf(after)).toContain("(3, 'eu')");
  });

  it('stops at a raising cell, answers isError naming it, and writes the notebook as far as it ran', async () => {
    writeFileSync(
      join(dir, 'fails.ipynb'),
      JSON.stringify(notebook([code('a = 1'), code('1 / 0'), code('print("not reached")')])),
    );
    const result = await call('run_notebook', {
      path: join(dir, 'fails.ipynb'),
      output_path: 'out/../fails-run.ipynb',
    });
    const text = textOf(result);
    expect(result.isError).toBe(true);
    expect(text).toContain('cell 1 raised ZeroDivisionError');
    expect(text).toMatch(/\[1\] error [\d.]+s: ZeroDivisionError: division by zero/);
    expect(text).toContain('[2] skipped (stopped)');
    const nb = readNb(join(dir, 'fails-run.ipynb'));
    expect(nb.cells[1]?.outputs?.[0]?.ename).toBe('ZeroDivisionError');
    expect(nb.cells[2]?.outputs).toEqual([]);

    const allowed = await call('run_notebook', { path: 'fails.ipynb', allow_errors: true });
    expect(textOf(allowed)).toMatch(/\[2\] ok [\d.]+s: not reached/);
    expect(allowed.isError).toBe(true);
  });

  it('stops a cell past timeout_seconds and keeps the kernel usable', async () => {
    writeFileSync(join(dir, 'slow.ipynb'), JSON.stringify(notebook([code('import time\ntime.sleep(60)')])));
    const result = await call('run_notebook', { path: 'slow.ipynb', timeout_seconds: 1 });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toMatch(/\[0\] timeout/);
    expect(textOf(await call('run_code', { code: '2 + 2' }))).toContain('4');
  });

  it('refuses paths that are not .ipynb, and a notebook that is not nbformat 4, writing nothing', async () => {
    writeFileSync(join(dir, 'notes.txt'), '{}');
    const notIpynb = await call('run_notebook', { path: 'notes.txt' });
    expect(notIpynb.isError).toBe(true);
    expect(textOf(notIpynb)).toContain('path must be a .ipynb file');
    const badOut = await call('run_notebook', { path: 'report.ipynb', output_path: 'report.json' });
    expect(badOut.isError).toBe(true);
    expect(textOf(badOut)).toContain('output_path must be a .ipynb file');
    expect(existsSync(join(dir, 'report.json'))).toBe(false);
    writeFileSync(
      join(dir, 'v3.ipynb'),
      JSON.stringify({ nbformat: 3, nbformat_minor: 0, metadata: {}, worksheets: [] }),
    );
    const v3 = await call('run_notebook', { path: 'v3.ipynb' });
    expect(v3.isError).toBe(true);
    expect(textOf(v3)).toContain('could not be read');
    expect(existsSync(join(dir, 'v3.out.ipynb'))).toBe(false);
    const saveBad = await call('save_notebook', { output_path: 'session.py' });
    expect(saveBad.isError).toBe(true);
    expect(existsSync(join(dir, 'session.py'))).toBe(false);
  });

  it("saves the run_code cells so far as a notebook, with their outputs and the kernel's counts", async () => {
    expect((await call('run_code', { code: 'saved = 40 + 2\nprint("saved", saved)' })).isError).toBe(false);
    expect((await call('run_code', { code: 'saved * 2' })).isError).toBe(false);
    const result = await call('save_notebook', { output_path: 'session.ipynb' });
    expect(result.isError, textOf(result)).toBe(false);
    expect(textOf(result)).toContain(join(dir, 'session.ipynb'));
    const nb = readNb(join(dir, 'session.ipynb')) as { cells: NbCell[]; metadata?: Record<string, unknown> };
    const last = nb.cells.slice(-2);
    expect(last.map((c) => join1(c.source))).toEqual(['saved = 40 + 2\nprint("saved", saved)', 'saved * 2']);
    expect(last[0]?.outputs).toEqual([{ output_type: 'stream', name: 'stdout', text: ['saved 42\n'] }]);
    expect(last[1]?.outputs?.[0]?.data?.['text/plain']).toEqual(['84']);
    expect(last[1]?.execution_count).toBe((last[0]?.execution_count ?? 0) + 1);
    expect(nb.metadata?.language_info).toMatchObject({ name: 'python' });
  });
});
