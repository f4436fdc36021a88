import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../dist/bin.cjs');
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

let stateDir: string;
let workDir: string;

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Milliseconds from the first stdout byte to exit (undefined when nothing was printed). */
  afterFirstOutputMs: number | undefined;
}

function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, KERNELWARDEN_STATE_DIR: stateDir, ...extra };
  delete env.KERNELWARDEN_CELL_TIMEOUT;
  delete env.KERNELWARDEN_GATEWAY_TOKEN;
  return env;
}

/** Runs the built binary to its end. */
function cli(args: string[], opts: { env?: Record<string, string>; timeoutMs?: number } = {}): Promise<Ran> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: workDir, env: cliEnv(opts.env) });
    let stdout = '';
    let stderr = '';
    let firstOutputAt: number | undefined;
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      firstOutputAt ??= performance.now();
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const killer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 90_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(killer);
      const afterFirstOutputMs = firstOutputAt === undefined ? undefined : performance.now() - firstOutputAt;
      resolvePromise({ code, stdout, stderr, afterFirstOutputMs });
    });
  });
}

beforeAll(() => {
  const root = testGateway().root;
  const id = randomBytes(4).toString('hex');
  stateDir = join(root, `cli-state-${id}`);
  workDir = join(root, `cli-work-${id}`);
  mkdirSync(stateDir, { recursive: true });
  mkdirSync(workDir, { recursive: true });
});

afterAll(async () => {
  // The embedded gateway outlives each `run` by its linger: stop it so no server or kernel survives the suite.
  const stopped = await cli(['gateway', 'stop']);
  expect(stopped.code, stopped.stderr).toBe(0);
});

describe('kernelwarden run (the built binary, embedded gateway)', () => {
  it("prints 2 for -c 'print(1+1)' and exits 0", async () => {
    const ran = await cli(['run', '-c', 'print(1+1)']);
    expect(ran.stderr).not.toMatch(/error/i);
    expect(ran.stdout).toBe('2\n');
    expect(ran.code).toBe(0);
  });

  it('exits 1 with the traceback on stderr when the cell raises', async () => {
    const ran = await cli(['run', '-c', 'def f():\n    return 1 / 0\nf()']);
    expect(ran.code).toBe(1);
    expect(ran.stdout).toBe('');
    expect(ran.stderr).toMatch(/Traceback|ZeroDivisionError/);
    expect(ran.stderr).toMatch(/ZeroDivisionError: division by zero/);
    expect(ran.stderr).toMatch(/return 1 \/ 0/);
    // a pipe gets no colour codes
    expect(ran.stderr).not.toContain('\x1b[');
  });

  it("prints 3 for --lang r -c 'cat(3)'", async () => {
    const ran = await cli(['run', '--lang', 'r', '-c', 'cat(3)']);
    expect(ran.stderr).not.toMatch(/unavailable|error/i);
    expect(ran.stdout).toBe('3');
    expect(ran.code).toBe(0);
  });

  it('exits 124 and says the kernel was reset when a SIGINT-ignoring cell runs past --timeout 2s', async () => {
    const code = [
      'import signal, time',
      'signal.signal(signal.SIGINT, signal.SIG_IGN)',
      'print("spinning", flush=True)',
      'while True:',
      '    time.sleep(0.05)',
    ].join('\n');
    const ran = await cli(['run', '--timeout', '2s', '--interrupt-grace', '1s', '--kill-grace', '5s', '-c', code]);
    expect(ran.stdout).toBe('spinning\n');
    expect(ran.code, ran.stderr).toBe(124);
    expect(ran.stderr).toMatch(/cell exceeded 2s/);
    expect(ran.stderr).toMatch(/the kernel was reset/);
    // 2 s budget + the graces + 3 s, counted from the cell's first output. A gateway kernel's kill is a server-side
    // restart (a new interpreter starts before it resolves), so the kill grace is sized to cover one kernel start.
    expect(ran.afterFirstOutputMs).toBeLessThan(2000 + 1000 + 5000 + 3000);
  });

  it('exits 3 with a clear message when --gateway cannot be reached', async () => {
    const ran = await cli(['run', '--gateway', 'http://127.0.0.1:1', '-c', 'print(1)'], {
      env: { KERNELWARDEN_GATEWAY_TOKEN: 'tok-never-printed' },
    });
    expect(ran.code).toBe(3);
    expect(ran.stdout).toBe('');
    expect(ran.stderr).toMatch(/^kernelwarden: .*127\.0\.0\.1:1/);
    expect(ran.stderr).not.toContain('tok-never-printed');
  });

  it('runs on a remote --gateway with the token from --token-env, and exits 3 on a wrong token without printing it', async () => {
    const { baseUrl, token } = testGateway();
    const ok = await cli(['run', '--gateway', baseUrl, '--token-env', 'KW_TEST_TOKEN', '-c', 'print(7 * 6)'], {
      env: { KW_TEST_TOKEN: token },
    });
    expect(ok.stderr).toBe('');
    expect(ok.stdout).toBe('42\n');
    expect(ok.code).toBe(0);

    const wrong = await cli(['run', '--gateway', baseUrl, '--token-env', 'KW_TEST_TOKEN', '-c', 'print(1)'], {
      env: { KW_TEST_TOKEN: 'wrong-token-value' },
    });
    expect(wrong.code).toBe(3);
    expect(wrong.stderr).toMatch(/token/i);
    expect(wrong.stderr).not.toContain('wrong-token-value');
    expect(wrong.stderr).not.toContain(token);
  });

  it('runs a FILE in --cwd with --env, and a failure with --json is still one JSON document', async () => {
    const dir = join(workDir, 'project');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(workDir, 'job.py'), 'import os\nprint(os.getcwd())\nprint(os.environ["KW_GREETING"])\n');
    const ran = await cli(['run', 'job.py', '--cwd', dir, '--env', 'KW_GREETING=hi there']);
    expect(ran.stdout).toBe(`${dir}\nhi there\n`);
    expect(ran.code).toBe(0);

    const failed = await cli(['run', '--json', '--gateway', 'http://127.0.0.1:1', '-c', 'print(1)']);
    expect(failed.code).toBe(3);
    expect(JSON.parse(failed.stdout)).toMatchObject({
      exitCode: 3,
      status: 'failed',
      error: { code: 'GATEWAY_UNAVAILABLE' },
    });
  });

  it('exits 4 when --hide is asked of a remote --gateway', async () => {
    const ran = await cli(['run', '--gateway', 'http://127.0.0.1:1', '--hide', workDir, '-c', 'print(1)']);
    expect(ran.code).toBe(4);
    expect(ran.stderr).toMatch(/--hide needs the embedded gateway/);
  });

  it("exits 3 within seconds with the kernel's own error when the python3 kernel dies while starting", async () => {
    // A python3 kernelspec first on JUPYTER_PATH whose process exits at once, as a broken environment's would.
    const id = randomBytes(4).toString('hex');
    const jupyterPath = join(workDir, `broken-jupyter-path-${id}`);
    mkdirSync(join(jupyterPath, 'kernels', 'python3'), { recursive: true });
    const missingModule = `kw_cli_missing_${id}`;
    writeFileSync(
      join(jupyterPath, 'kernels', 'python3', 'kernel.json'),
      JSON.stringify({ argv: ['python3', '-c', `import ${missingModule}`, '{connection_file}'], language: 'python' }),
    );
    // Its own gateway: the server reads JUPYTER_PATH when it starts.
    const env = { KERNELWARDEN_STATE_DIR: join(stateDir, `broken-${id}`), JUPYTER_PATH: jupyterPath };
    try {
      const started = performance.now();
      const ran = await cli(['run', '-c', 'print(1)'], { env });
      const tookMs = performance.now() - started;
      expect(ran.code, ran.stderr).toBe(3);
      expect(ran.stdout).toBe('');
      expect(ran.stderr).toMatch(/died while starting: its process exited/);
      expect(ran.stderr).toContain(`No module named '${missingModule}'`);
      // Server start-up included; far below the 60 s start deadline, which a refused interpreter must not wait out.
      expect(tookMs).toBeLessThan(30_000);
    } finally {
      const stopped = await cli(['gateway', 'stop'], { env });
      expect(stopped.code, stopped.stderr).toBe(0);
    }
  });

  it('prints one JSON document with --json', async () => {
    const ran = await cli(['run', '--json', '-c', 'print("hello")\n21 * 2']);
    expect(ran.code).toBe(0);
    const doc = JSON.parse(ran.stdout);
    expect(doc).toMatchObject({ exitCode: 0, status: 'ok', language: 'python', stdout: 'hello\n', timedOut: false });
    expect(doc.outputs).toContainEqual(
      expect.objectContaining({ type: 'execute_result', data: { 'text/plain': '42' } }),
    );
    expect(ran.stderr).toBe('');
  });

  it('gives --json a plain-text traceback, once, in error', async () => {
    const ran = await cli(['run', '--json', '-c', 'def f():\n    raise ValueError("bad")\nf()']);
    expect(ran.code).toBe(1);
    const doc = JSON.parse(ran.stdout);
    expect(doc.error).toMatchObject({ ename: 'ValueError', evalue: 'bad' });
    expect(doc.error.traceback.join('\n')).toContain('ValueError: bad');
    expect(ran.stdout).not.toContain('\\u001b');
    expect(doc.outputs.filter((o: { type: string }) => o.type === 'error')).toEqual([]);
  });

  it('writes a valid PNG for a plot with --outputs-dir and says where', async () => {
    const outputs = join(workDir, 'plots');
    const ran = await cli(['run', '--lang', 'r', '--outputs-dir', outputs, '-c', 'plot(1:10)']);
    expect(ran.code, ran.stderr).toBe(0);
    const pngs = readdirSync(outputs).filter((name) => name.endsWith('.png'));
    expect(pngs).toHaveLength(1);
    const bytes = readFileSync(join(outputs, pngs[0]!));
    expect(bytes.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
    expect(bytes.length).toBeGreaterThan(1000);
    expect(ran.stderr).toContain(`saved image/png to ${join('plots', pngs[0]!)}`);
  });
});

describe('kernelwarden demo', () => {
  it('runs the scripted tour and every step behaves as announced', async () => {
    const outputs = join(workDir, 'demo');
    const ran = await cli(['demo', '--outputs-dir', outputs], { timeoutMs: 240_000 });
    expect(ran.code, `${ran.stdout}\n${ran.stderr}`).toBe(0);
    expect(ran.stdout).toMatch(/Hello from Python 3/);
    expect(ran.stdout).toMatch(/Hello from R version/);
    expect(ran.stdout).toMatch(/interrupted in .* \(KeyboardInterrupt\)/);
    expect(ran.stdout).toMatch(/reset in .*the kernel was reset/);
    expect(ran.stdout).toMatch(/fresh interpreter, ready/);
    expect(ran.stdout).toMatch(/Timeline\n/);
    expect(ran.stdout).toMatch(/All 6 steps behaved as expected/);
    const png = readdirSync(outputs).find((name) => name.endsWith('.png'));
    expect(png).toBeDefined();
    expect(readFileSync(join(outputs, png!)).subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
  }, 300_000);

  it('removes its temporary plot directory when it ends without --outputs-dir', async () => {
    const tmp = join(workDir, 'demo-tmp');
    mkdirSync(tmp, { recursive: true });
    const ran = await cli(['demo'], { timeoutMs: 240_000, env: { TMPDIR: tmp } });
    expect(ran.code, `${ran.stdout}\n${ran.stderr}`).toBe(0);
    expect(ran.stdout).toMatch(/plots go to .*kernelwarden-demo-.*, removed at the end/);
    expect(readdirSync(tmp).filter((name) => name.startsWith('kernelwarden-demo-'))).toEqual([]);
  }, 300_000);
});

/** A repl in a tmux terminal of its own: send keys, read the screen, wait for text; `close()` kills the server. */
function tmuxRepl(args: string[]) {
  const socket = `kw-cli-${randomBytes(4).toString('hex')}`;
  const tmux = (...tmuxArgs: string[]) => {
    const r = spawnSync('tmux', ['-L', socket, ...tmuxArgs], { encoding: 'utf8', env: cliEnv() });
    if (r.status !== 0) throw new Error(`tmux ${tmuxArgs[0]} failed: ${r.stderr}`);
    return r.stdout;
  };
  const screen = () => tmux('capture-pane', '-p', '-J', '-S', '-200', '-t', 'repl');
  const waitForScreen = async (pattern: RegExp, what: string, timeoutMs = 60_000) => {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const text = screen();
      if (pattern.test(text)) return text;
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}; screen:\n${text}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const quoted = args.map((a) => `'${a}'`).join(' ');
  tmux(
    'new-session',
    '-d',
    '-s',
    'repl',
    '-x',
    '160',
    '-y',
    '50',
    '-e',
    `KERNELWARDEN_STATE_DIR=${stateDir}`,
    `cd '${workDir}' && exec '${process.execPath}' '${BIN}' repl ${quoted}`,
  );
  const keys = (...k: string[]) => tmux('send-keys', '-t', 'repl', ...k);
  return { keys, screen, waitForScreen, close: () => spawnSync('tmux', ['-L', socket, 'kill-server']) };
}

describe('kernelwarden repl (in a real terminal, driven by tmux)', () => {
  it('kills at once on a second Ctrl-C, then says the cell was stopped before the kernel was restarted', async () => {
    // An interrupt grace of a minute: the kill must not wait for it.
    const repl = tmuxRepl(['--interrupt-grace', '60s']);
    try {
      await repl.waitForScreen(/py> $/m, 'the prompt');
      repl.keys(
        'x = 1; import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print("deaf", flush=True); time.sleep(300)',
        'Enter',
      );
      await repl.waitForScreen(/^deaf$/m, 'the cell to start');
      repl.keys('C-c');
      await repl.waitForScreen(/interrupting/, 'the first Ctrl-C');
      repl.keys('C-c');
      const text = await repl.waitForScreen(/the kernel was restarted[\s\S]*py> $/m, 'the restart', 30_000);
      expect(text.indexOf('killing the kernel')).toBeGreaterThan(text.indexOf('interrupting'));
      expect(text.indexOf('the cell was stopped')).toBeGreaterThan(text.indexOf('killing the kernel'));
      expect(text.indexOf('the kernel was restarted')).toBeGreaterThan(text.indexOf('the cell was stopped'));
      repl.keys("print('x' in globals())", 'Enter');
      await repl.waitForScreen(/^False$/m, 'a fresh interpreter');
    } finally {
      repl.close();
    }
  });

  it('indents the line after one ending in ":" and goes back a level on an empty line', async () => {
    const repl = tmuxRepl([]);
    try {
      await repl.waitForScreen(/py> $/m, 'the prompt');
      // Each line is typed without its indentation, once the repl has typed it: the prompt shows it first.
      const typeAt = async (line: string, shown: RegExp) => {
        repl.keys(line, 'Enter');
        await repl.waitForScreen(shown, `the indentation after ${JSON.stringify(line)}`, 20_000);
      };
      await typeAt('for i in range(2):', /^\.\.\. {5}$/m);
      await typeAt('if i:', /^\.\.\. {5}if i:\n\.\.\. {9}$/m);
      await typeAt('print("odd", i)', /^\.\.\. {9}print\("odd", i\)\n\.\.\. {9}$/m);
      // An empty line in the nested block: back one level.
      await typeAt('', /^\.\.\. {9}\n\.\.\. {5}$/m);
      await typeAt('print("each", i)', /^\.\.\. {5}print\("each", i\)\n\.\.\. {5}$/m);
      // At the first level: it runs the block.
      repl.keys('', 'Enter');
      const text = await repl.waitForScreen(/^each 1$/m, 'the block to run');
      expect(text).toMatch(/^each 0\nodd 1\neach 1$/m);
      // Typed ahead in one go (as fast as a paste): the lines get the same indentation.
      repl.keys(
        'for j in range(2):',
        'Enter',
        'if j:',
        'Enter',
        'print("J", j)',
        'Enter',
        'Enter',
        'print("all", j)',
        'Enter',
        'Enter',
      );
      const after = await repl.waitForScreen(/^all 1$/m, 'the typed-ahead block to run');
      expect(after).toMatch(/^all 0\nJ 1\nall 1$/m);
    } finally {
      repl.close();
    }
  });

  it('runs a cell, interrupts time.sleep(60) with Ctrl-C, and runs R after :r', async () => {
    const socket = `kw-cli-${randomBytes(4).toString('hex')}`;
    const tmux = (...args: string[]) => {
      const r = spawnSync('tmux', ['-L', socket, ...args], { encoding: 'utf8', env: cliEnv() });
      if (r.status !== 0) throw new Error(`tmux ${args[0]} failed: ${r.stderr}`);
      return r.stdout;
    };
    const screen = () => tmux('capture-pane', '-p', '-J', '-S', '-200', '-t', 'repl');
    const waitForScreen = async (pattern: RegExp, what: string, timeoutMs = 60_000) => {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const text = screen();
        if (pattern.test(text)) return text;
        if (Date.now() > until) throw new Error(`timed out waiting for ${what}; screen:\n${text}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const command = `cd '${workDir}' && exec '${process.execPath}' '${BIN}' repl`;
    try {
      tmux(
        'new-session',
        '-d',
        '-s',
        'repl',
        '-x',
        '160',
        '-y',
        '50',
        '-e',
        `KERNELWARDEN_STATE_DIR=${stateDir}`,
        command,
      );
      await waitForScreen(/py> $/m, 'the prompt');

      tmux('send-keys', '-t', 'repl', 'print(6 * 7)', 'Enter');
      await waitForScreen(/^42$/m, 'the first cell');

      tmux('send-keys', '-t', 'repl', 'import time; print("sleeping", flush=True); time.sleep(60)', 'Enter');
      // Once the cell printed, the kernel runs its code: the interrupt lands in the sleep. (Sent earlier, on a loaded
      // machine it can land in ipykernel's own handling of the request, which then goes idle without a reply.)
      await waitForScreen(/^sleeping$/m, 'the cell to start');
      tmux('send-keys', '-t', 'repl', 'C-c');
      await waitForScreen(/KeyboardInterrupt/, 'the interrupt', 20_000);
      await waitForScreen(/KeyboardInterrupt[\s\S]*py> $/m, 'the prompt after the interrupt');

      tmux('send-keys', '-t', 'repl', ':r', 'Enter');
      await waitForScreen(/r> $/m, 'the R prompt');
      tmux('send-keys', '-t', 'repl', 'cat(paste0("R says ", 40 + 2), "\\n")', 'Enter');
      await waitForScreen(/^R says 42 $/m, 'the R cell');

      // Ctrl-D leaves: the repl shuts its kernels down and exits, which closes the tmux session.
      tmux('send-keys', '-t', 'repl', 'C-d');
      const until = Date.now() + 30_000;
      while (spawnSync('tmux', ['-L', socket, 'has-session', '-t', 'repl']).status === 0) {
        if (Date.now() > until) throw new Error(`the repl did not exit after Ctrl-D; screen:\n${screen()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      spawnSync('tmux', ['-L', socket, 'kill-server']);
    }
  });
});
