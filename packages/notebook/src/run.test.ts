import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ExecuteResult, emptyResult, InvalidOptionsError } from '@kernelwarden/core';
import { ManualClock, RecordingKernel } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import {
  type CellReport,
  coalesceStreams,
  createMessageTap,
  loadNotebook,
  type Notebook,
  NotebookCellError,
  NotebookCellTimeoutError,
  NotebookIOError,
  NotebookOutputs,
  runNotebook,
  START_ALLOWANCE_MS,
  serializeNotebook,
} from './index.js';

const code = (id: string, source: string, extra: Record<string, unknown> = {}) => ({
  cell_type: 'code',
  id,
  metadata: {},
  source,
  execution_count: null,
  outputs: [],
  ...extra,
});

/** A kernel that prints its code's `print:` text, raises on `raise:`, and counts executions as a kernel does. */
function scriptedKernel(): RecordingKernel {
  let count = 0;
  return new RecordingKernel('nb', {
    execute: (source, opts) => {
      count++;
      const result: ExecuteResult = { ...emptyResult(opts.cellId), status: 'ok', executionCount: count };
      if (source.startsWith('print:')) {
        const output = { type: 'stream' as const, name: 'stdout' as const, text: `${source.slice(6)}\n` };
        opts.onOutput?.(output);
        return { ...result, stdout: output.text, outputs: [output] };
      }
      if (source.startsWith('raise:')) {
        const error = { ename: 'ValueError', evalue: source.slice(6), traceback: ['tb'] };
        opts.onOutput?.({ type: 'error', ...error });
        return { ...result, status: 'error', error, outputs: [{ type: 'error', ...error }] };
      }
      return result;
    },
  });
}

describe('runNotebook on a kernel handle', () => {
  it('runs code cells in order, numbers them 1..N, keeps skipped cells as they are, and reports each cell', async () => {
    const kernel = scriptedKernel();
    const reports: CellReport[] = [];
    const stale = [{ output_type: 'stream', name: 'stdout', text: 'stale\n' }];
    const run = await runNotebook(
      {
        nbformat: 4,
        nbformat_minor: 5,
        metadata: {},
        cells: [
          code('a', 'print:one'),
          { cell_type: 'markdown', id: 'm', metadata: {}, source: 'text' },
          code('b', '  \n', { execution_count: 4, outputs: stale }),
          code('c', 'print:skipped', { metadata: { tags: ['skip-execution'] }, execution_count: 5, outputs: stale }),
          code('d', 'raise:allowed', { metadata: { tags: ['raises-exception'] } }),
          code('e', 'print:two'),
        ],
      },
      { kernel, cellTimeoutMs: 0, onCell: (r) => reports.push(r) },
    );
    expect(reports.map((r) => [r.status, r.skipReason ?? null, r.executionCount])).toEqual([
      ['ok', null, 1],
      ['skipped', 'not-code', null],
      ['skipped', 'blank', 4],
      ['skipped', 'skip-execution', 5],
      ['error', null, 2],
      ['ok', null, 3],
    ]);
    const cells = run.notebook.cells as unknown as { outputs?: unknown[] }[];
    expect(cells[0]!.outputs).toEqual([{ output_type: 'stream', name: 'stdout', text: 'one\n' }]);
    expect(cells[2]!.outputs).toEqual(stale);
    expect(cells[3]!.outputs).toEqual(stale);
    expect(cells[4]!.outputs).toEqual([
      { output_type: 'error', ename: 'ValueError', evalue: 'allowed', traceback: ['tb'] },
    ]);
    expect(kernel.isAlive()).toBe(true);
  });

  it('stops at the first error not allowed, naming the cell; allowErrorNames lets a named error through', async () => {
    const nb = {
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {},
      cells: [code('a', 'print:one'), code('b', 'raise:boom'), code('c', 'print:never')],
    };
    const error = await runNotebook(nb, { kernel: scriptedKernel(), cellTimeoutMs: 0 }).catch((e: unknown) => e);
    expect(NotebookCellError.isInstance(error)).toBe(true);
    const e = error as NotebookCellError;
    expect([e.cellIndex, e.cellId, e.ename, e.evalue]).toEqual([1, 'b', 'ValueError', 'boom']);
    expect(e.result?.cells.map((c) => c.status)).toEqual(['ok', 'error', 'skipped']);
    const run = await runNotebook(nb, { kernel: scriptedKernel(), cellTimeoutMs: 0, allowErrorNames: ['ValueError'] });
    expect(run.cells.map((c) => c.status)).toEqual(['ok', 'error', 'ok']);
  });

  it('refuses bad options with InvalidOptionsError naming the field, before anything runs', async () => {
    const kernel = scriptedKernel();
    const nb = { nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [code('a', 'print:x')] };
    const cases: [object, string][] = [
      [{ kernel, cellTimeoutMs: -1 }, 'options.cellTimeoutMs'],
      [{ kernel, allowErrors: 'yes' }, 'options.allowErrors'],
      [{ kernel, parameters: 5 }, 'options.parameters'],
      [{ kernel, onCell: 1 }, 'options.onCell'],
      [{ kernel, colour: 'red' }, 'options.colour'],
      [{}, 'options.session'],
      [{ kernel, session: { execute: async () => emptyResult('x') } }, 'options.session'],
    ];
    for (const [options, path] of cases) {
      const error = await runNotebook(nb, options as never).catch((e: unknown) => e);
      expect(InvalidOptionsError.isInstance(error), path).toBe(true);
      expect((error as InvalidOptionsError).path).toBe(path);
    }
    expect(kernel.executeCalls).toBe(0);
  });
});

describe('NotebookOutputs builds outputs from messages as nbclient does', () => {
  const msg = (msg_type: string, content: Record<string, unknown>, msg_id = `${msg_type}-${Math.random()}`) => ({
    header: { msg_type, msg_id, date: '2026-01-02T03:04:05.123456Z' },
    content,
  });
  const display = (text: string, id?: string, type = 'display_data') =>
    msg(type, { data: { 'text/plain': text }, metadata: {}, ...(id ? { transient: { display_id: id } } : {}) });

  it('updates every earlier output with a display id, in any cell; clear_output forgets the cleared ones', () => {
    const nb: Notebook = loadNotebook({
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {},
      cells: [code('a', 'x'), code('b', 'y'), code('c', 'z')],
    });
    const outputs = new NotebookOutputs(nb.cells);
    const a = outputs.begin(0);
    a.message(display('first', 'd1'));
    a.message(display('other', 'd2'));
    const b = outputs.begin(1);
    b.message(display('second', 'd1'));
    b.message(display('gone', 'd2'));
    b.message(msg('clear_output', { wait: true }));
    b.message(msg('stream', { name: 'stdout', text: 'after clear\n' }));
    const c = outputs.begin(2);
    c.message(display('updated', 'd1', 'update_display_data'));
    c.message(display('updated d2', 'd2', 'update_display_data'));
    c.message(msg('execute_input', { code: 'z', execution_count: 7 }));
    const text = (i: number) =>
      (nb.cells[i] as { outputs: { data?: { 'text/plain': string }; text?: string }[] }).outputs.map(
        (o) => o.data?.['text/plain'] ?? o.text,
      );
    expect(text(0)).toEqual(['updated', 'updated d2']);
    expect(text(1)).toEqual(['after clear\n']);
    expect(text(2)).toEqual([]);
    expect(nb.cells[2]!.execution_count).toBe(7);
    expect(nb.cells[2]!.metadata.execution).toEqual({ 'iopub.execute_input': '2026-01-02T03:04:05.123456Z' });
  });
});

describe('coalesceStreams is nbclient coalesce_streams', () => {
  it('merges each stream into its first output, applies carriage returns, and swaps a stderr output directly followed by stdout', () => {
    const s = (name: string, text: string) => ({ output_type: 'stream' as const, name, text });
    const d = { output_type: 'display_data' as const, data: { 'text/plain': 'x' }, metadata: {} };
    expect(
      coalesceStreams([
        s('stderr', 'e1\n'),
        s('stdout', 'o1\n'),
        d,
        s('stderr', 'e2\n'),
        s('stdout', '5%\r10%\rdone\n'),
      ]),
    ).toEqual([s('stdout', 'o1\ndone\n'), s('stderr', 'e1\ne2\n'), d]);
    expect(coalesceStreams([s('stdout', 'a\r\nb\r')])).toEqual([s('stdout', 'a\r\nb\r')]);
  });
});

describe('files', () => {
  it('writes the notebook in place (outputPath = the input) through a renamed temporary file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kw-nb-unit-'));
    try {
      const path = join(dir, 'in.ipynb');
      writeFileSync(
        path,
        JSON.stringify({ nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [code('a', 'print:hello')] }),
      );
      const run = await runNotebook(path, { kernel: scriptedKernel(), cellTimeoutMs: 0, outputPath: path });
      expect(readFileSync(path, 'utf8')).toBe(serializeNotebook(run.notebook));
      expect(readdirSync(dir)).toEqual(['in.ipynb']);
      const missing = await runNotebook(join(dir, 'nope.ipynb'), { kernel: scriptedKernel() }).catch((e: unknown) => e);
      expect(NotebookIOError.isInstance(missing)).toBe(true);
      expect((missing as NotebookIOError).code).toBe('NOTEBOOK_IO');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("an abort stops the run with the signal's reason, after writing the notebook so far", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kw-nb-unit-'));
    try {
      const controller = new AbortController();
      const reason = new Error('stop now');
      const kernel = new RecordingKernel('held', { hold: true, releaseOnInterrupt: true });
      const output = join(dir, 'out.ipynb');
      const running = runNotebook(
        { nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [code('a', 'x'), code('b', 'y')] },
        {
          kernel,
          cellTimeoutMs: 0,
          signal: controller.signal,
          outputPath: output,
          onCellStart: () => queueMicrotask(() => controller.abort(reason)),
        },
      );
      await expect(running).rejects.toBe(reason);
      const written = JSON.parse(readFileSync(output, 'utf8')) as { cells: { execution_count: number | null }[] };
      expect(written.cells.map((c) => c.execution_count)).toEqual([null, null]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('timing', () => {
  it("records nbclient's four keys by default, and leaves metadata.execution alone with recordTiming: false", async () => {
    const nb = {
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {},
      cells: [code('a', 'print:x', { metadata: { execution: { 'iopub.status.busy': 'earlier' } } })],
    };
    const timed = await runNotebook(nb, { kernel: scriptedKernel(), cellTimeoutMs: 0 });
    const execution = timed.notebook.cells[0]!.metadata.execution as Record<string, string>;
    expect(Object.keys(execution).sort()).toEqual([
      'iopub.execute_input',
      'iopub.status.busy',
      'iopub.status.idle',
      'shell.execute_reply',
    ]);
    for (const t of Object.values(execution)) expect(t).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    const untimed = await runNotebook(nb, { kernel: scriptedKernel(), cellTimeoutMs: 0, recordTiming: false });
    expect(untimed.notebook.cells[0]!.metadata.execution).toEqual({ 'iopub.status.busy': 'earlier' });
  });
});

describe('the budget of a session cell', () => {
  /** A session whose cells run until their signal aborts, then answer cancelled (as KernelSession does). */
  const hangingSession = () => ({
    execute: (_code: string, opts: { cellId?: string; signal?: AbortSignal }) =>
      new Promise<ExecuteResult>((resolve) => {
        opts.signal?.addEventListener('abort', () => resolve({ ...emptyResult(opts.cellId ?? 'x'), cancelled: true }), {
          once: true,
        });
      }),
  });
  const nb = { nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [code('a', 'while True: pass')] };

  it('runs out after cellTimeoutMs without a tap', async () => {
    const clock = new ManualClock();
    const running = runNotebook(nb, { session: hangingSession(), cellTimeoutMs: 1_000, clock }).catch(
      (e: unknown) => e,
    );
    await clock.advance(999);
    expect(clock.pendingTimers()).toBe(1);
    await clock.advance(1);
    const error = await running;
    expect(NotebookCellTimeoutError.isInstance(error)).toBe(true);
    expect((error as NotebookCellTimeoutError).cellIndex).toBe(0);
  });

  it('with a tap that never sees the cell sent, still runs out after cellTimeoutMs + START_ALLOWANCE_MS', async () => {
    const clock = new ManualClock();
    const tap = createMessageTap();
    const running = runNotebook(nb, { session: hangingSession(), tap, cellTimeoutMs: 1_000, clock }).catch(
      (e: unknown) => e,
    );
    await clock.advance(1_000 + START_ALLOWANCE_MS - 1);
    expect(clock.pendingTimers()).toBe(1);
    await clock.advance(1);
    expect(NotebookCellTimeoutError.isInstance(await running)).toBe(true);
    expect(tap.watching).toBe(0);
  });
});
