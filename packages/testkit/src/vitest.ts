import type { ExecuteResult, KernelHandle, Output } from '@kernelwarden/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Code snippets in the kernel's own language, so the conformance suite can drive any kernel: real Python through a
 * gateway, R, or a scripted fake.
 */
export interface ConformanceCode {
  /** Sets variable `name` to the number `value`. */
  setVar(name: string, value: number): string;
  /** Prints variable `name` followed by a newline (stdout `"<value>\n"`); fails when it is not defined. */
  printVar(name: string): string;
  /** Prints `text` followed by a newline on stdout. */
  print(text: string): string;
  /** Raises an error whose message contains `message`. */
  raise(message: string): string;
  /** Runs for `ms` milliseconds; an interrupt stops it. */
  sleep(ms: number): string;
  /** Joins statements into one cell. @defaultValue joins with newlines */
  join?(statements: string[]): string;
  /** Reads one line from stdin with `prompt` and prints it. Required when `stdin` is declared. */
  input?(prompt: string): string;
  /** Produces rich output: a `display_data` or `execute_result` with a MIME type other than `text/plain`. Required when `richOutput` is declared. */
  richOutput?(): string;
}

const py = (text: string) => JSON.stringify(text);

/**
 * Conformance snippets in Python. They run on real IPython kernels and on FakeGateway's default `pythonLikeScript`.
 *
 * Use them for any Python kernel: `describeKernelHandle('mine', start, { code: pythonConformanceCode, stdin: true, richOutput: true })`.
 */
export const pythonConformanceCode: ConformanceCode = {
  setVar: (name, value) => `${name} = ${value}`,
  printVar: (name) => `print(${name})`,
  print: (text) => `print(${py(text)})`,
  raise: (message) => `raise RuntimeError(${py(message)})`,
  sleep: (ms) => `import time\ntime.sleep(${ms / 1000})`,
  join: (statements) => statements.join('\n'),
  input: (prompt) => `_kw_answer = input(${py(prompt)})\nprint(_kw_answer)`,
  richOutput: () => `from IPython.display import HTML, display\ndisplay(HTML(${py('<b>kernelwarden</b>')}))`,
};

/** What the kernel under test can do; optional behaviours are tested only when declared present. */
export interface KernelHandleCapabilities {
  /** The snippets the suite runs. @defaultValue pythonConformanceCode */
  code?: ConformanceCode;
  /** Whether the kernel supports stdin (`onInput`). Declare `false` to skip the stdin tests. @defaultValue true */
  stdin?: boolean;
  /** Whether the kernel produces rich output. Declare `false` to skip the rich-output test. @defaultValue true */
  richOutput?: boolean;
  /** Whether `kill()` followed by `restart()` gives a working kernel. @defaultValue true */
  killThenRestart?: boolean;
  /** Per-test timeout in ms. @defaultValue 30000 */
  testTimeoutMs?: number;
}

/** A kernel made for the suite, with optional cleanup run after its shutdown (e.g. closing a gateway). */
export interface KernelHandleFixture<K extends KernelHandle = KernelHandle> {
  kernel: K;
  cleanup?: () => Promise<void> | void;
}

/** Makes a fresh, started kernel (or a fixture with cleanup). Called once for the shared kernel and once per test that needs its own. */
export type KernelHandleFactory<K extends KernelHandle = KernelHandle> = () =>
  | K
  | KernelHandleFixture<K>
  | Promise<K | KernelHandleFixture<K>>;

function isFixture<K extends KernelHandle>(v: K | KernelHandleFixture<K>): v is KernelHandleFixture<K> {
  return typeof (v as KernelHandleFixture<K>).kernel === 'object' && typeof (v as K).execute !== 'function';
}

async function make<K extends KernelHandle>(factory: KernelHandleFactory<K>): Promise<KernelHandleFixture<K>> {
  const made = await factory();
  return isFixture(made) ? made : { kernel: made };
}

async function dispose(fixture: KernelHandleFixture | undefined): Promise<void> {
  if (!fixture) return;
  try {
    await fixture.kernel.shutdown({ timeoutMs: 10_000 });
  } finally {
    await fixture.cleanup?.();
  }
}

function streamText(result: ExecuteResult): string {
  return result.outputs
    .filter((o): o is Extract<Output, { type: 'stream' }> => o.type === 'stream' && o.name === 'stdout')
    .map((o) => o.text)
    .join('');
}

/** Merges adjacent stream outputs of the same name into one. */
function mergeStreams(outputs: readonly Output[]): Output[] {
  const merged: Output[] = [];
  for (const o of outputs) {
    const last = merged.at(-1);
    if (o.type === 'stream' && last?.type === 'stream' && last.name === o.name) {
      merged[merged.length - 1] = { ...last, text: last.text + o.text };
    } else merged.push(o);
  }
  return merged;
}

/** Resolves once `onOutput` has seen `text` on stdout; tells that a cell is running before a test acts on it. */
function outputWatcher(text: string) {
  let seen = '';
  let resolve: () => void = () => {};
  const started = new Promise<void>((r) => {
    resolve = r;
  });
  const onOutput = (o: Output) => {
    if (o.type !== 'stream') return;
    seen += o.text;
    if (seen.includes(text)) resolve();
  };
  return { started, onOutput };
}

/** What the suite's cases share: the shared kernel, the snippets and the bounds. */
interface SuiteContext<K extends KernelHandle> {
  /** The shared kernel (throws when its factory failed). */
  kernel: () => K;
  factory: KernelHandleFactory<K>;
  capabilities: KernelHandleCapabilities & { code: ConformanceCode; stdin: boolean; richOutput: boolean };
  code: ConformanceCode;
  join: (statements: string[]) => string;
  /** Per-test timeout. */
  timeout: number;
  /** How long a cell meant to be stopped would run. */
  long: number;
}

/** Cases on running cells: status, outputs and their order, cell ids, state kept between cells. */
function executionCases<K extends KernelHandle>({ kernel, code, join, timeout }: SuiteContext<K>): void {
  it('is alive once started and has an id', () => {
    expect(kernel().isAlive()).toBe(true);
    expect(typeof kernel().id).toBe('string');
    expect(kernel().id.length).toBeGreaterThan(0);
  });

  it('executes a cell: status ok, its stdout, nothing cancelled', { timeout }, async () => {
    const result = await kernel().execute(code.print('conformance-ok'));
    expect(result.status).toBe('ok');
    expect(result.stdout).toContain('conformance-ok\n');
    expect(result.error).toBeUndefined();
    expect(result.cancelled).toBe(false);
    expect(result.timedOut).toBe(false);
  });

  it('reports an error the cell raised as status error, without rejecting', { timeout }, async () => {
    const result = await kernel().execute(code.raise('conformance-boom'));
    expect(result.status).toBe('error');
    expect(result.error?.ename).toBeTruthy();
    expect(`${result.error?.evalue} ${result.error?.traceback.join('\n')}`).toContain('conformance-boom');
    expect(result.outputs.some((o) => o.type === 'error')).toBe(true);
    expect(result.cancelled).toBe(false);
  });

  it('delivers outputs to onOutput in order, and keeps the same outputs on the result', { timeout }, async () => {
    const seen: Output[] = [];
    const result = await kernel().execute(join([code.print('first'), code.print('second'), code.print('third')]), {
      onOutput: (o) => seen.push(o),
    });
    expect(result.status).toBe('ok');
    expect(streamText(result)).toBe('first\nsecond\nthird\n');
    // Kernels batch stream writes and clients may coalesce them, so compare with adjacent streams merged.
    expect(mergeStreams(seen)).toEqual(mergeStreams(result.outputs));
  });

  it('returns the cell id it was given, and a fresh one when none was given', { timeout }, async () => {
    const given = await kernel().execute(code.print('id'), { cellId: 'conformance-cell-7' });
    expect(given.cellId).toBe('conformance-cell-7');
    const a = await kernel().execute(code.print('id'));
    const b = await kernel().execute(code.print('id'));
    expect(a.cellId).toBeTruthy();
    expect(b.cellId).toBeTruthy();
    expect(a.cellId).not.toBe(b.cellId);
  });

  it('keeps interpreter state between cells', { timeout }, async () => {
    expect((await kernel().execute(code.setVar('kw_conformance', 41))).status).toBe('ok');
    const result = await kernel().execute(code.printVar('kw_conformance'));
    expect(result.status).toBe('ok');
    expect(result.stdout).toBe('41\n');
  });
}

/** Cases on stopping a running cell: an interrupt, the caller's abort, `timeoutMs`. */
function stoppingCases<K extends KernelHandle>({ kernel, code, join, timeout, long }: SuiteContext<K>): void {
  it('delivers an interrupt: the running cell ends without finishing, not cancelled', { timeout }, async () => {
    const watch = outputWatcher('conformance-started');
    const running = kernel().execute(join([code.print('conformance-started'), code.sleep(long)]), {
      onOutput: watch.onOutput,
    });
    await watch.started;
    expect(await kernel().interrupt()).toEqual({ delivered: true });
    const result = await running;
    expect(result.status).not.toBe('ok');
    expect(result.cancelled).toBe(false);
    expect(result.timedOut).toBe(false);
    expect((await kernel().execute(code.print('after-interrupt'))).stdout).toContain('after-interrupt\n');
  });

  it('settles at once with cancelled (not timedOut) when the signal aborts', { timeout }, async () => {
    const watch = outputWatcher('conformance-abort');
    const controller = new AbortController();
    const running = kernel().execute(join([code.print('conformance-abort'), code.sleep(long)]), {
      onOutput: watch.onOutput,
      signal: controller.signal,
    });
    await watch.started;
    controller.abort(new Error('caller gave up'));
    const result = await running;
    expect(result.cancelled).toBe(true);
    expect(result.timedOut).toBe(false);
    expect((await kernel().execute(code.print('after-abort'))).stdout).toContain('after-abort\n');
  });

  it('marks cancelled and timedOut when timeoutMs runs out', { timeout }, async () => {
    const result = await kernel().execute(code.sleep(long), { timeoutMs: 300 });
    expect(result.cancelled).toBe(true);
    expect(result.timedOut).toBe(true);
    expect((await kernel().execute(code.print('after-timeout'))).stdout).toContain('after-timeout\n');
  });
}

/** Cases on the behaviours a kernel may declare absent: stdin and rich output. */
function optionalCases<K extends KernelHandle>({ kernel, code, timeout, capabilities }: SuiteContext<K>): void {
  it.skipIf(!capabilities.stdin)('answers stdin requests through onInput', { timeout }, async () => {
    if (!code.input) throw new Error('capabilities.stdin is declared, but code.input is missing');
    const prompts: { prompt: string; password: boolean }[] = [];
    const result = await kernel().execute(code.input('Name? '), {
      onInput: (req) => {
        prompts.push(req);
        return 'conformance-answer';
      },
    });
    expect(result.status).toBe('ok');
    expect(result.stdinRequested).toBe(true);
    expect(prompts).toEqual([{ prompt: 'Name? ', password: false }]);
    expect(result.stdout).toContain('conformance-answer');
  });

  it.skipIf(!capabilities.stdin)('fails a cell that reads stdin when onInput is absent', { timeout }, async () => {
    if (!code.input) throw new Error('capabilities.stdin is declared, but code.input is missing');
    const result = await kernel().execute(code.input('Name? '));
    expect(result.status).toBe('error');
  });

  it.skipIf(!capabilities.richOutput)('keeps rich output with its MIME bundle', { timeout }, async () => {
    if (!code.richOutput) throw new Error('capabilities.richOutput is declared, but code.richOutput is missing');
    const result = await kernel().execute(code.richOutput());
    expect(result.status).toBe('ok');
    const rich = result.outputs.filter(
      (o) =>
        (o.type === 'display_data' || o.type === 'execute_result') &&
        Object.keys(o.data).some((k) => k !== 'text/plain'),
    );
    expect(rich.length).toBeGreaterThan(0);
  });
}

/** Cases on the kernel's life: restart, kill, shutdown. */
function lifecycleCases<K extends KernelHandle>({
  kernel,
  code,
  timeout,
  capabilities,
  factory,
}: SuiteContext<K>): void {
  it('restart clears interpreter state and keeps the same, alive handle', { timeout }, async () => {
    const before = kernel();
    const id = before.id;
    expect((await before.execute(code.setVar('kw_restart', 7))).status).toBe('ok');
    await before.restart();
    expect(kernel()).toBe(before);
    expect(before.id).toBe(id);
    expect(before.isAlive()).toBe(true);
    const result = await before.execute(code.printVar('kw_restart'));
    expect(result.status).toBe('error');
    expect((await before.execute(code.print('after-restart'))).stdout).toContain('after-restart\n');
  });

  it('after a kill() that says it restarted, is alive with fresh state and needs no restart()', {
    timeout,
  }, async () => {
    const before = kernel();
    expect((await before.execute(code.setVar('kw_killed', 3))).status).toBe('ok');
    const outcome = await before.kill();
    if (outcome?.restarted !== true) {
      await before.restart();
      return;
    }
    expect(before.isAlive()).toBe(true);
    expect((await before.execute(code.printVar('kw_killed'))).status).toBe('error');
    expect((await before.execute(code.print('after-kill-restarted'))).stdout).toContain('after-kill-restarted\n');
  });

  it.skipIf(capabilities.killThenRestart === false)(
    'comes back working after kill() then restart()',
    { timeout },
    async () => {
      await kernel().kill();
      await kernel().restart();
      expect(kernel().isAlive()).toBe(true);
      expect((await kernel().execute(code.print('after-kill'))).stdout).toContain('after-kill\n');
    },
  );

  it('shutdown is confirmed, makes isAlive false at once, and is idempotent', { timeout }, async () => {
    const own = await make(factory);
    try {
      expect(own.kernel.isAlive()).toBe(true);
      const first = own.kernel.shutdown({ timeoutMs: 10_000 });
      expect(own.kernel.isAlive()).toBe(false);
      expect(await first).toEqual({ confirmed: true });
      expect(await own.kernel.shutdown()).toEqual({ confirmed: true });
      expect(own.kernel.isAlive()).toBe(false);
    } finally {
      await dispose(own);
    }
  });
}

/**
 * Registers a vitest suite that checks any `KernelHandle` against the contract: execute ok / error, output order,
 * cell id round trip, state between cells, interrupt delivered, abort and timeout marking `cancelled` / `timedOut`,
 * restart clearing state on the same handle, shutdown confirmed and idempotent, `isAlive` transitions, and — when
 * declared — stdin and rich output.
 *
 * Use it in your own test file for your kernel implementation: `describeKernelHandle('MyKernel', () => start(), caps)`;
 * without `caps` the kernel is driven with Python code and every optional behaviour is tested.
 * Tests run in order on one shared kernel, except the shutdown test, which makes its own.
 */
export function describeKernelHandle<K extends KernelHandle>(
  name: string,
  factory: KernelHandleFactory<K>,
  declared: KernelHandleCapabilities = {},
): void {
  // Undeclared capabilities are tested: a suite skips only what its caller declared absent.
  const capabilities = { code: pythonConformanceCode, stdin: true, richOutput: true, ...declared };
  const { code } = capabilities;
  const join = (statements: string[]) => (code.join ? code.join(statements) : statements.join('\n'));
  const timeout = capabilities.testTimeoutMs ?? 30_000;
  const long = Math.max(60_000, timeout * 2);

  describe(`KernelHandle conformance: ${name}`, () => {
    let shared: KernelHandleFixture<K> | undefined;
    const kernel = (): K => {
      if (!shared) throw new Error('the kernel factory failed; see the beforeAll error');
      return shared.kernel;
    };
    beforeAll(async () => {
      shared = await make(factory);
    }, timeout);
    afterAll(async () => {
      await dispose(shared);
    }, timeout);

    // In this order, on the shared kernel; the shutdown case (last) makes its own.
    const context: SuiteContext<K> = { kernel, factory, capabilities, code, join, timeout, long };
    executionCases(context);
    stoppingCases(context);
    optionalCases(context);
    lifecycleCases(context);
  });
}
