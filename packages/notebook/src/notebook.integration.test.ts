import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GatewayClient, GatewayKernel } from '@kernelwarden/gateway-client';
import { createRSlot, startIRKernel } from '@kernelwarden/r-kernel';
import { KernelSession } from '@kernelwarden/supervisor';
import { kernelPids, testGateway } from '@kernelwarden/test-env';
import { createWatchdog, type WatchdogEvent } from '@kernelwarden/watchdog';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type CellReport,
  cellsToNotebook,
  createMessageTap,
  injectParameters,
  loadNotebook,
  type MessageTap,
  NotebookCellError,
  NotebookCellTimeoutError,
  type Parameters,
  parameterLanguage,
  runNotebook,
  serializeNotebook,
} from './index.js';
import { pythonWith, runPython } from './python.test-fixture.js';

const PY = { kernelspec: { name: 'python3', display_name: 'Python 3 (ipykernel)', language: 'python' } };
const R = { kernelspec: { name: 'ir', display_name: 'R', language: 'R' } };

let nextId = 0;
const code = (source: string, extra: Record<string, unknown> = {}) => ({
  cell_type: 'code',
  id: `c${nextId++}`,
  metadata: {},
  source,
  execution_count: null,
  outputs: [],
  ...extra,
});
const md = (source: string) => ({ cell_type: 'markdown', id: `m${nextId++}`, metadata: {}, source });
const notebook = (metadata: object, cells: object[], minor = 5) => ({
  nbformat: 4,
  nbformat_minor: minor,
  metadata,
  cells,
});

// One write per stream message: ipykernel may send the writes of one print() (its text, then its end) apart.
const FLUSH = 'import sys\ndef w(text, stream=sys.stdout):\n    stream.write(text)\n    stream.flush()\n';
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

/** The notebooks run by nbclient and by kernelwarden, each exercising a rule of how nbclient builds outputs. */
const CORPUS: Record<string, { nb: object; parameters?: Parameters }> = {
  'python: streams, results, unicode, blank and skipped cells, an allowed error': {
    nb: notebook(PY, [
      md('# Streams ✓'),
      code('x = 1\nx + 1'),
      code(`${FLUSH}w('héllo 中文 😀\\n')\nw('to stderr\\n', sys.stderr)\nw('again\\n')`),
      code('   \n', { execution_count: 7, outputs: [{ output_type: 'stream', name: 'stdout', text: 'stale\n' }] }),
      code("raise Exception('never run')", {
        metadata: { tags: ['skip-execution'] },
        execution_count: 9,
        outputs: [{ output_type: 'stream', name: 'stdout', text: 'kept\n' }],
      }),
      code("{'a': 1.0, 'b': [1, 2.5], 'c': 'ü'}"),
      code(`${FLUSH}for i in range(3):\n    w(f'step {i}\\r')\nw('done\\n')`),
      code('1/0', { metadata: { tags: ['raises-exception'] } }),
      code('y = x * 2\ny'),
    ]),
  },
  'python: display ids across cells, update_display_data, rich mimetypes, images': {
    nb: notebook(PY, [
      code(
        "from IPython.display import display, HTML, Markdown, JSON, SVG, Image, Latex, update_display\nh = display(HTML('<b>first</b>'), display_id=True)",
      ),
      code("h.update(HTML('<i>updated</i>'))\ndisplay(Markdown('**md** é'), display_id='shared')"),
      code("display(Markdown('second *shared*'), display_id='shared')"),
      code(`${FLUSH}update_display(Markdown('final shared'), display_id='shared')\nw('after update\\n')`),
      code(
        'display(JSON({\'k\': [1, 2.0, None]}))\ndisplay(SVG(\'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>\'))\ndisplay(Latex(\'$x^2$\'))',
      ),
      code(`import base64\npng = base64.b64decode('${PNG}')\ndisplay(Image(data=png))\nImage(data=png, width=20)`),
    ]),
  },
  'python: clear_output, with and without wait, and display ids it forgets': {
    nb: notebook(PY, [
      code(
        `${FLUSH}from IPython.display import clear_output, display, update_display\nw('gone\\n')\nclear_output()\nw('kept\\n')`,
      ),
      code("w('old\\n')\nclear_output(wait=True)\nw('new\\n')\nclear_output(wait=True)"),
      code("display('a', display_id='d2')\nclear_output()\ndisplay('b')"),
      code("update_display('updated', display_id='d2')\nw('nothing to update\\n')"),
    ]),
  },
  'python: an nbformat 4.4 notebook (no cell ids) stays 4.4': {
    nb: notebook(
      PY,
      [
        {
          cell_type: 'code',
          metadata: {},
          source: "import sys\n_ = sys.stdout.write('v4.4\\n')",
          execution_count: null,
          outputs: [],
        },
        { cell_type: 'markdown', metadata: {}, source: 'text' },
      ],
      4,
    ),
  },
  'python: papermill parameters after the cell tagged parameters': {
    nb: notebook(PY, [
      md('parameters below'),
      code("alpha = 0.1\nname = 'default'\nflag = False", { metadata: { tags: ['parameters'] } }),
      code(
        "import sys\n_ = sys.stdout.write(' '.join(map(str, [alpha, repr(name), flag, items, conf, big, whole])) + '\\n')",
      ),
    ]),
    parameters: {
      alpha: 0.6,
      name: 'wörld "quoted" \\ back\n😀',
      flag: true,
      items: [1, 2.5, null],
      conf: { k: 'v', n: [false] },
      big: 12345678901234567890n,
      whole: 3,
    },
  },
  'R: streams, values, a data frame, an allowed error': {
    nb: notebook(R, [
      code("cat('hello from R\\n')\nmessage('to stderr')"),
      code('x <- c(1.5, 2, 3)\nmean(x)'),
      code("df <- data.frame(a = 1:2, b = c('é', '中'))\ndf"),
      code("stop('R error')", { metadata: { tags: ['raises-exception'] } }),
      code('print(x * 2)'),
    ]),
  },
  'R: papermill parameters': {
    nb: notebook(R, [
      code("n <- 1\nlabel <- 'default'", { metadata: { tags: ['parameters'] } }),
      code('print(n); print(label); print(on); print(is.null(none)); print(unlist(vec)); print(nested$k)'),
    ]),
    parameters: { n: 3, label: 'café "q"', on: false, none: null, vec: [1, 2.5], nested: { k: 'v' } },
  },
};

/** Timestamps and the injected cell's random id differ between two runs; everything else must not. */
function masked(text: string): string {
  return text
    .replace(
      /("(?:iopub\.status\.busy|iopub\.status\.idle|iopub\.execute_input|shell\.execute_reply)": )"[^"]*"/g,
      '$1"<t>"',
    )
    .replace(/"id": "[0-9a-f]{8}"/g, '"id": "<injected>"');
}

describe('runNotebook against nbclient on the real jupyter-server', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kw-notebook-'));
  const python = pythonWith(['nbclient', 'nbformat']);
  let client: GatewayClient;
  let tap: MessageTap;
  const kernels: GatewayKernel[] = [];
  const sessions: KernelSession<GatewayKernel, unknown, 'r'>[] = [];
  const rungs: WatchdogEvent[] = [];

  /** A fresh session (fresh kernels, so execution counts start at 1 as nbclient's own kernel's do). */
  function newSession(policy: { interruptGraceMs?: number; killGraceMs?: number } = {}) {
    const watchdog = createWatchdog({ interruptGraceMs: 2_000, killGraceMs: 2_000, ...policy });
    watchdog.on('*', (e) => rungs.push(e));
    const start = async (kernel: Promise<GatewayKernel>) => {
      const k = await kernel;
      kernels.push(k);
      return k;
    };
    const session = new KernelSession<GatewayKernel, unknown, 'r'>({
      python: (ctx) => start(GatewayKernel.start({ gateway: client, cwd: dir, signal: ctx.signal })),
      r: createRSlot({ spawn: (ctx) => start(startIRKernel({ gateway: client, cwd: dir, signal: ctx.signal })) }),
      executor: watchdog,
    });
    sessions.push(session);
    return session;
  }

  beforeAll(() => {
    const { baseUrl, token } = testGateway();
    tap = createMessageTap();
    client = new GatewayClient({ baseUrl, token, WebSocket: tap.wrap() });
  });

  afterAll(async () => {
    for (const session of sessions) await session.close();
    for (const kernel of kernels) await kernel.shutdown();
    for (const kernel of kernels) expect(kernelPids(kernel.id)).toEqual([]);
    rmSync(dir, { recursive: true, force: true });
  });

  /** nbclient's run of each input file (its own kernels), written by nbformat; a failing cell still writes. */
  function nbclientRun(inputs: { input: string; output: string; allowErrors: boolean }[]): void {
    runPython(
      python,
      `
import json, sys, warnings
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
warnings.simplefilter("ignore")
for job in json.load(sys.stdin):
    nb = nbformat.read(job["input"], as_version=4)
    client = NotebookClient(nb, timeout=120, allow_errors=job["allowErrors"], resources={"metadata": {"path": ${JSON.stringify(dir)}}})
    try:
        client.execute()
    except CellExecutionError:
        pass
    nbformat.write(nb, job["output"])
`,
      JSON.stringify(inputs),
      300_000,
    );
  }

  const names = Object.keys(CORPUS);
  const ours = new Map<string, string>();
  const theirs = new Map<string, string>();

  beforeAll(async () => {
    const jobs: { input: string; output: string; allowErrors: boolean }[] = [];
    for (const [i, name] of names.entries()) {
      const { nb, parameters } = CORPUS[name]!;
      const input = join(dir, `in-${i}.ipynb`);
      const loaded = loadNotebook(nb);
      // nbclient gets the notebook as papermill would have parameterised it; runNotebook injects the parameters itself.
      if (parameters) injectParameters(loaded, parameters, parameterLanguage(loaded)!);
      writeFileSync(input, serializeNotebook(loaded));
      jobs.push({ input, output: join(dir, `nbclient-${i}.ipynb`), allowErrors: false });
      const session = newSession();
      const run = await runNotebook(nb, {
        session,
        tap,
        ...(parameters ? { parameters } : {}),
        outputPath: join(dir, `ours-${i}.ipynb`),
      });
      await session.close();
      ours.set(name, serializeNotebook(run.notebook));
      expect(readFileSync(join(dir, `ours-${i}.ipynb`), 'utf8')).toBe(ours.get(name));
    }
    nbclientRun(jobs);
    for (const [i, name] of names.entries()) theirs.set(name, readFileSync(join(dir, `nbclient-${i}.ipynb`), 'utf8'));
  }, 600_000);

  for (const name of Object.keys(CORPUS)) {
    it(`writes what nbclient writes, byte for byte but the timestamps: ${name}`, () => {
      expect(masked(ours.get(name)!)).toBe(masked(theirs.get(name)!));
    });
  }

  it('the corpus exercises what it names: updated displays, cleared outputs, skipped cells, injected parameters', () => {
    type Out = { output_type: string; text?: string[]; data?: Record<string, string[] | string> };
    type Nb = {
      nbformat_minor: number;
      cells: { id?: string; execution_count: number | null; outputs?: Out[]; metadata: { tags?: string[] } }[];
    };
    const get = (name: string) => JSON.parse(ours.get(name)!) as Nb;
    const md = (o: Out | undefined) => [o?.data?.['text/markdown']].flat().join('');
    const display = get(names[1]!);
    expect(display.cells[0]!.outputs![0]!.data!['text/html']).toEqual(['<i>updated</i>']);
    expect(md(display.cells[1]!.outputs![0])).toBe('final shared');
    expect(md(display.cells[2]!.outputs![0])).toBe('final shared');
    expect(display.cells[3]!.outputs!.map((o) => o.output_type)).toEqual(['stream']);
    expect(display.cells[5]!.outputs!.map((o) => o.output_type)).toEqual(['display_data', 'execute_result']);
    const cleared = get(names[2]!);
    expect(cleared.cells[0]!.outputs!.map((o) => o.text?.join(''))).toEqual(['kept\n']);
    expect(cleared.cells[1]!.outputs!.map((o) => o.text?.join(''))).toEqual(['new\n']);
    expect(cleared.cells[2]!.outputs!.map((o) => o.data?.['text/plain'])).toEqual([["'b'"]]);
    const basics = get(names[0]!);
    expect(basics.cells.map((c) => c.execution_count)).toEqual([undefined, 1, 2, 7, 9, 3, 4, 5, 6]);
    expect(basics.cells[2]!.outputs!.map((o) => o.output_type)).toEqual(['stream', 'stream', 'stream']);
    expect(basics.cells[4]!.outputs![0]!.text).toEqual(['kept\n']);
    const v44 = get(names[3]!);
    expect(v44.nbformat_minor).toBe(4);
    expect(v44.cells.every((c) => c.id === undefined)).toBe(true);
    const params = get(names[4]!);
    expect(params.cells[2]!.metadata.tags).toEqual(['injected-parameters']);
    expect(params.cells[3]!.outputs![0]!.text!.join('')).toBe(
      "0.6 'wörld \"quoted\" \\\\ back\\n😀' True [1, 2.5, None] {'k': 'v', 'n': [False]} 12345678901234567890 3\n",
    );
  });

  it("mergeStreams merges as nbclient's coalesce_streams (compared with nbclient where it has it)", async () => {
    const nb = notebook(PY, [
      code(
        `${FLUSH}w('a\\n')\nw('err1\\n', sys.stderr)\nw('b\\n')\nfrom IPython.display import display\ndisplay('x')\nw('c\\n')\nw('50%\\r100%\\n')`,
      ),
    ]);
    const session = newSession();
    const run = await runNotebook(nb, { session, tap, mergeStreams: true });
    await session.close();
    const outputs = (run.notebook.cells[0] as { outputs: unknown[] }).outputs;
    expect(outputs).toEqual([
      { output_type: 'stream', name: 'stdout', text: 'a\nb\nc\n100%\n' },
      { output_type: 'stream', name: 'stderr', text: 'err1\n' },
      { output_type: 'display_data', data: { 'text/plain': "'x'" }, metadata: {} },
    ]);
    const hasCoalesce = runPython(
      python,
      'from nbclient import NotebookClient\nprint(hasattr(NotebookClient, "coalesce_streams"))',
    ).trim();
    if (hasCoalesce === 'True') {
      const input = join(dir, 'merge-in.ipynb');
      const output = join(dir, 'merge-nbclient.ipynb');
      writeFileSync(input, serializeNotebook(loadNotebook(nb)));
      runPython(
        python,
        `import nbformat\nfrom nbclient import NotebookClient\nnb = nbformat.read(${JSON.stringify(input)}, as_version=4)\nNotebookClient(nb, timeout=120, coalesce_streams=True).execute()\nnbformat.write(nb, ${JSON.stringify(output)})`,
      );
      expect(masked(serializeNotebook(run.notebook))).toBe(masked(readFileSync(output, 'utf8')));
    }
  });

  it('records nbclient timing keys from the kernel messages, and language_info from the kernel', () => {
    const nb = JSON.parse(ours.get(names[0]!)!) as {
      metadata: { language_info: { name: string } };
      cells: { cell_type: string; metadata: { execution?: Record<string, string> } }[];
    };
    expect(nb.metadata.language_info.name).toBe('python');
    const timing = nb.cells[1]!.metadata.execution!;
    expect(Object.keys(timing).sort()).toEqual([
      'iopub.execute_input',
      'iopub.status.busy',
      'iopub.status.idle',
      'shell.execute_reply',
    ]);
    for (const t of Object.values(timing)) expect(t).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(Date.parse(timing['iopub.status.idle']!)).toBeGreaterThanOrEqual(Date.parse(timing['iopub.status.busy']!));
  });

  it('stops at the first error with NotebookCellError naming the cell, writes the notebook so far, and reports each cell', async () => {
    const session = newSession();
    const reports: CellReport[] = [];
    const output = join(dir, 'stopped.ipynb');
    const error = await runNotebook(
      notebook(PY, [
        code("print('one')"),
        md('between'),
        code("raise ValueError('stop here')"),
        code("print('never')"),
      ]),
      { session, tap, outputPath: output, onCell: (r) => reports.push(r) },
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(NotebookCellError.isInstance(error)).toBe(true);
    const e = error as NotebookCellError;
    expect([e.code, e.cellIndex, e.ename, e.evalue]).toEqual(['NOTEBOOK_CELL_ERROR', 2, 'ValueError', 'stop here']);
    expect(reports.map((r) => r.status)).toEqual(['ok', 'skipped', 'error', 'skipped']);
    expect(reports[3]!.skipReason).toBe('stopped');
    const written = JSON.parse(readFileSync(output, 'utf8')) as {
      cells: { outputs?: { output_type: string }[]; execution_count?: number | null }[];
    };
    expect(written.cells[2]!.outputs!.map((o) => o.output_type)).toEqual(['error']);
    expect(written.cells[2]!.execution_count).toBe(2);
    expect(written.cells[3]!.outputs).toEqual([]);
    expect(written.cells[3]!.execution_count).toBeNull();
    expect(e.result?.notebook.cells).toHaveLength(4);

    const allowed = await runNotebook(notebook(PY, [code("raise ValueError('go on')"), code("print('after')")]), {
      session,
      tap,
      allowErrors: true,
    });
    expect(allowed.cells.map((c) => c.status)).toEqual(['error', 'ok']);
    await session.close();
  });

  it('an overrunning cell is interrupted by the watchdog: NotebookCellTimeoutError, the kernel and its variables kept', async () => {
    const session = newSession();
    rungs.length = 0;
    const error = await runNotebook(
      notebook(PY, [code('x = 41'), code('import time\ntime.sleep(100)'), code('print(1)')]),
      {
        session,
        tap,
        cellTimeoutMs: 1_500,
      },
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(NotebookCellTimeoutError.isInstance(error)).toBe(true);
    const e = error as NotebookCellTimeoutError;
    expect([e.name, e.code, e.cellIndex, e.kernelReset]).toEqual(['TimeoutError', 'NOTEBOOK_CELL_TIMEOUT', 1, false]);
    expect(rungs.map((r) => r.type)).toEqual(['interrupt']);
    expect(e.result?.cells.map((c) => c.status)).toEqual(['ok', 'timeout', 'skipped']);
    const after = await session.execute('print(x + 1)');
    expect(after.stdout).toBe('42\n');
    await session.close();
  });

  it('a cell that ignores the interrupt is killed and its kernel restarted (the ladder, not a hang)', async () => {
    const session = newSession();
    rungs.length = 0;
    const error = await runNotebook(
      notebook(PY, [code('import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass')]),
      { session, tap, cellTimeoutMs: 1_000 },
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(NotebookCellTimeoutError.isInstance(error)).toBe(true);
    expect((error as NotebookCellTimeoutError).kernelReset).toBe(true);
    expect(rungs.map((r) => r.type)).toEqual(['interrupt', 'kill', 'restart', 'bootstrap']);
    expect((await session.execute('print("alive")')).stdout).toBe('alive\n');
    await session.close();
  });

  it('runs on a bare kernel under its own watchdog, and reports progress per cell and per output', async () => {
    const kernel = await GatewayKernel.start({ gateway: client, cwd: dir });
    kernels.push(kernel);
    const started: number[] = [];
    const outputs: string[] = [];
    const run = await runNotebook(notebook(PY, [code("import sys\n_ = sys.stdout.write('a\\n')"), code('2 + 3')]), {
      kernel,
      tap,
      cellTimeoutMs: 30_000,
      onCellStart: (e) => started.push(e.index),
      onOutput: (e) => outputs.push(`${e.index}:${e.output.type}`),
    });
    expect(started).toEqual([0, 1]);
    expect(outputs).toEqual(['0:stream', '1:execute_result']);
    expect(run.cells.map((c) => c.executionCount)).toEqual([1, 2]);
    expect((run.notebook.metadata.language_info as { name: string }).name).toBe('python');
    expect(kernel.isAlive()).toBe(true);
  });

  it('without a tap, builds the outputs from the kernel handle: streams, results and errors as nbclient writes them', async () => {
    const session = newSession();
    const { nb } = CORPUS['python: streams, results, unicode, blank and skipped cells, an allowed error']!;
    const run = await runNotebook(nb, { session });
    await session.close();
    const text = serializeNotebook(run.notebook);
    expect(masked(text)).toBe(masked(theirs.get(names[0]!)!));
  });

  it("saves an agent's session cells as a notebook nbformat validates", async () => {
    const session = newSession();
    const cells = [];
    for (const source of ['import math', 'print(math.pi)', 'math.sqrt(16)']) {
      cells.push({ code: source, result: await session.execute(source) });
    }
    await session.close();
    const file = join(dir, 'session.ipynb');
    writeFileSync(file, serializeNotebook(cellsToNotebook(cells)));
    const check = runPython(
      python,
      `import sys, nbformat\nnb = nbformat.read(sys.argv[1] if len(sys.argv) > 1 else ${JSON.stringify(file)}, as_version=4)\nnbformat.validate(nb)\nprint(nb.cells[1].outputs[0].text, end='')\nprint(nb.cells[2].outputs[0].data['text/plain'])`,
    );
    expect(check).toBe('3.141592653589793\n4.0\n');
  });
});
