import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { injectParameters, loadNotebook, serializeNotebook } from '@kernelwarden/notebook';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cliDirs, type Ran, runCli } from './cli-binary.test-fixture.js';

// `kernelwarden run NOTEBOOK.ipynb` on the real stack, compared with nbclient's run of the same notebook.

let stateDir: string;
let workDir: string;

const cli = (args: string[]): Promise<Ran> => runCli(args, { stateDir, cwd: workDir, timeoutMs: 120_000 });

/** The Python of the stack under test (its jupyter-server's interpreter), which has nbclient. */
function stackPython(): string {
  const server = process.env.KERNELWARDEN_JUPYTER_SERVER || 'jupyter-server';
  const path = server.includes('/') ? server : execFileSync('sh', ['-c', `command -v ${server}`], { encoding: 'utf8' });
  const first = readFileSync(path.trim(), 'utf8').split('\n', 1)[0] ?? '';
  const words = first.slice(2).trim().split(/\s+/);
  const python = (words[0]?.endsWith('/env') ? words[1] : words[0]) as string;
  // A stack without nbclient is a failure here, not a skip.
  execFileSync(python, ['-c', 'import nbclient, nbformat']);
  return python;
}

let nextId = 0;
const code = (source: string, tags: string[] = []) => ({
  cell_type: 'code',
  id: `c${nextId++}`,
  metadata: tags.length > 0 ? { tags } : {},
  source,
  execution_count: null,
  outputs: [],
});
const notebook = (cells: object[]) => ({
  nbformat: 4,
  nbformat_minor: 5,
  metadata: { kernelspec: { name: 'python3', display_name: 'Python 3 (ipykernel)', language: 'python' } },
  cells,
});
const write = (name: string, nb: object) => writeFileSync(join(workDir, name), JSON.stringify(nb));

/** The timestamps and the injected cell's fresh id, which differ between two runs. */
function masked(text: string): string {
  return text
    .replace(
      /("(?:iopub\.status\.busy|iopub\.status\.idle|iopub\.execute_input|shell\.execute_reply)": )"[^"]*"/g,
      '$1"<t>"',
    )
    .replace(/"id": "[0-9a-f]{8}"/g, '"id": "<injected>"');
}

type Nb = {
  cells: { source: string | string[]; outputs?: { output_type: string; text?: string[]; ename?: string }[] }[];
};
const read = (name: string) => JSON.parse(readFileSync(join(workDir, name), 'utf8')) as Nb;
const textOf = (nb: Nb, cell: number) => (nb.cells[cell]?.outputs ?? []).map((o) => (o.text ?? []).join('')).join('');

const FLUSH = 'import sys\ndef w(text, stream=sys.stdout):\n    stream.write(text)\n    stream.flush()\n';
const REPORT = notebook([
  { cell_type: 'markdown', id: 'm0', metadata: {}, source: '# Report' },
  code("alpha = 0.1\nregion = 'us'\nruns = 1", ['parameters']),
  code(`${FLUSH}w(f'{region} {alpha * 2} {runs}\\n')\nw('to stderr\\n', sys.stderr)`),
  code(
    "from IPython.display import display, clear_output, Markdown\nh = display(Markdown('first'), display_id=True)\nw('gone\\n')\nclear_output()\nh.update(Markdown('updated'))\n{'k': [1, 2.5, None]}",
  ),
  code('   \n'),
  code('runs * 2'),
]);

beforeAll(() => {
  ({ stateDir, workDir } = cliDirs('cli-notebook'));
});

afterAll(async () => {
  const stopped = await cli(['gateway', 'stop']);
  expect(stopped.code, stopped.stderr).toBe(0);
});

describe('kernelwarden run NOTEBOOK.ipynb', () => {
  it("runs a notebook with -p parameters and writes, with --output, what nbclient writes for papermill's notebook", async () => {
    write('report.ipynb', REPORT);
    const ran = await cli([
      'run',
      'report.ipynb',
      '-p',
      'alpha',
      '0.6',
      '-p',
      'region',
      'eu',
      '-p',
      'runs',
      '3',
      '--output',
      'report.out.ipynb',
    ]);
    expect(ran.code, ran.stderr).toBe(0);
    // The cells' output streams as a script's does.
    expect(ran.stdout).toContain('eu 1.2 3\n');
    expect(ran.stderr).toContain('to stderr\n');
    expect(ran.stderr).toContain('kernelwarden: wrote report.out.ipynb');
    const ours = readFileSync(join(workDir, 'report.out.ipynb'), 'utf8');

    // nbclient runs the notebook as papermill parameterises it.
    const loaded = loadNotebook(REPORT);
    injectParameters(
      loaded,
      [
        ['alpha', 0.6],
        ['region', 'eu'],
        ['runs', 3],
      ],
      'python',
    );
    writeFileSync(join(workDir, 'papermill.ipynb'), serializeNotebook(loaded));
    execFileSync(
      stackPython(),
      [
        '-c',
        'import sys, nbformat\nfrom nbclient import NotebookClient\nnb = nbformat.read(sys.argv[1], as_version=4)\n' +
          'NotebookClient(nb, timeout=120, resources={"metadata": {"path": sys.argv[3]}}).execute()\nnbformat.write(nb, sys.argv[2])',
        join(workDir, 'papermill.ipynb'),
        join(workDir, 'nbclient.ipynb'),
        workDir,
      ],
      { timeout: 120_000, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    const theirs = readFileSync(join(workDir, 'nbclient.ipynb'), 'utf8');
    expect(masked(ours)).toBe(masked(theirs));
    // The comparison covers what it should: the parameters, the cleared and updated outputs.
    const nb = JSON.parse(ours) as Nb;
    expect([nb.cells[2]?.source].flat().join('')).toBe('# Parameters\nalpha = 0.6\nregion = "eu"\nruns = 3\n');
    expect(textOf(nb, 3)).toBe('eu 1.2 3\nto stderr\n');
    expect(nb.cells[4]?.outputs?.map((o) => o.output_type)).toEqual(['execute_result']);
    // The input is left as it was.
    expect(JSON.parse(readFileSync(join(workDir, 'report.ipynb'), 'utf8'))).toEqual(REPORT);
  });

  it('exits 1 at the first cell that raises, naming it and its index, writing the notebook as far as it ran', async () => {
    write('fails.ipynb', notebook([code('print("first")'), code('1 / 0'), code('print("never")')]));
    const ran = await cli(['run', 'fails.ipynb', '--output', 'fails.out.ipynb']);
    expect(ran.code).toBe(1);
    expect(ran.stdout).toBe('first\n');
    expect(ran.stderr).toMatch(/ZeroDivisionError\s+Traceback/);
    expect(ran.stderr).toContain('kernelwarden: cell 1 (id ');
    expect(ran.stderr).toMatch(/cell 1 \(id c\d+\) raised ZeroDivisionError: division by zero\n/);
    expect(ran.stderr).toContain('kernelwarden: wrote the notebook as far as it ran to fails.out.ipynb');
    const nb = read('fails.out.ipynb');
    expect(nb.cells[1]?.outputs?.[0]?.ename).toBe('ZeroDivisionError');
    expect(nb.cells[2]?.outputs).toEqual([]);

    // Without --output or --inplace nothing is written (as jupyter execute).
    const before = readdirSync(workDir).sort();
    const bare = await cli(['run', 'fails.ipynb']);
    expect(bare.code).toBe(1);
    expect(bare.stderr).not.toContain('wrote');
    expect(readdirSync(workDir).sort()).toEqual(before);
    expect(JSON.parse(readFileSync(join(workDir, 'fails.ipynb'), 'utf8')).cells[1].outputs).toEqual([]);
  });

  it('goes on past raising cells with --allow-errors and exits 0', async () => {
    const ran = await cli(['run', 'fails.ipynb', '--allow-errors', '--output', 'allowed.ipynb']);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe('first\nnever\n');
    expect(ran.stderr).toContain('kernelwarden: 1 cell raised (--allow-errors): 1');
    // Not a terminal: no progress lines.
    expect(ran.stderr).not.toMatch(/kernelwarden: cell \d+ (ok|error)/);
    const nb = read('allowed.ipynb');
    expect(nb.cells[1]?.outputs?.[0]?.ename).toBe('ZeroDivisionError');
    expect(textOf(nb, 2)).toBe('never\n');
  });

  it('reports each cell on a terminal', async () => {
    const quote = (arg: string) => `'${arg.replaceAll("'", "'\\''")}'`;
    const ran = await runCli(
      ['-qec', [process.execPath, BIN, 'run', 'fails.ipynb', '--allow-errors'].map(quote).join(' '), '/dev/null'],
      { stateDir, cwd: workDir, program: 'script', timeoutMs: 120_000 },
    );
    expect(ran.code, ran.stdout).toBe(0);
    // script(1) gives the command one terminal for stdout and stderr alike.
    expect(ran.stdout).toMatch(/kernelwarden: cell 0 ok \(\d+\.\ds\)\r?\n/);
    expect(ran.stdout).toMatch(/kernelwarden: cell 1 error \(\d+\.\ds\)\r?\n/);
    expect(ran.stdout).toMatch(/kernelwarden: cell 2 ok \(\d+\.\ds\)\r?\n/);
  });

  it('writes the executed notebook over its input with --inplace, Python parameters for a notebook naming no kernel', async () => {
    // A notebook that names no kernel runs in Python, and takes Python parameters.
    write('inplace.ipynb', { ...notebook([code('x = 1', ['parameters']), code('print(x + 1)')]), metadata: {} });
    const ran = await cli(['run', 'inplace.ipynb', '--inplace', '-p', 'x', '20']);
    expect(ran.code, ran.stderr).toBe(0);
    const nb = read('inplace.ipynb');
    expect([nb.cells[1]?.source].flat().join('')).toBe('# Parameters\nx = 20\n');
    expect(textOf(nb, 2)).toBe('21\n');
  });

  it('runs an R notebook (its kernelspec) in IRkernel, with R parameters', async () => {
    write('report-r.ipynb', {
      ...notebook([code("region <- 'us'", ['parameters']), code("cat(region, nchar(region), '\\n')")]),
      metadata: { kernelspec: { name: 'ir', display_name: 'R', language: 'R' } },
    });
    const ran = await cli(['run', 'report-r.ipynb', '-p', 'region', 'eu-west', '--output', 'report-r.out.ipynb']);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe('eu-west 7 \n');
    const nb = read('report-r.out.ipynb');
    expect([nb.cells[1]?.source].flat().join('')).toBe('# Parameters\nregion = "eu-west"\n');
    expect(textOf(nb, 2)).toBe('eu-west 7 \n');
  });

  it('exits 124 for a cell past --timeout, and 2 for a file that is not a notebook', async () => {
    write('slow.ipynb', notebook([code('import time\ntime.sleep(60)'), code('print("never")')]));
    const slow = await cli(['run', 'slow.ipynb', '--timeout', '1s', '--output', 'slow.out.ipynb']);
    expect(slow.code).toBe(124);
    expect(slow.stderr).toMatch(/cell 0 .*--timeout/);
    expect(read('slow.out.ipynb').cells[1]?.outputs).toEqual([]);
    writeFileSync(join(workDir, 'broken.ipynb'), '{"nbformat": 3}');
    const broken = await cli(['run', 'broken.ipynb']);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/^kernelwarden: broken\.ipynb is not a notebook kernelwarden can run: /);
  });
});
