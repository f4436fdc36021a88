import { describe, expect, it } from 'vitest';
import { type Command, parseCommand } from './args.js';
import { COMMAND_OPTIONS, helpText } from './help.js';
import { UsageError } from './usage-error.js';

function run(argv: string[], env: Record<string, string> = {}) {
  const command = parseCommand(argv, { env, cwd: '/work' });
  if (command.command !== 'run') throw new Error(`expected run, got ${command.command}`);
  return command;
}

function usage(argv: string[], env: Record<string, string> = {}): UsageError {
  try {
    parseCommand(argv, { env, cwd: '/work' });
  } catch (error) {
    expect(UsageError.isInstance(error)).toBe(true);
    return error as UsageError;
  }
  throw new Error(`expected a usage error for ${argv.join(' ')}`);
}

describe('parseCommand: run', () => {
  it('reads -c CODE with the defaults', () => {
    const { source, stack } = run(['run', '-c', 'print(1+1)']);
    expect(source).toEqual({ kind: 'code', code: 'print(1+1)' });
    expect(stack).toEqual({
      language: 'python',
      timeoutMs: undefined,
      interruptGraceMs: undefined,
      killGraceMs: undefined,
      cwd: '/work',
      env: {},
      gatewayUrl: undefined,
      tokenEnv: 'KERNELWARDEN_GATEWAY_TOKEN',
      hide: [],
      allow: [],
      outputsDir: undefined,
      json: false,
      maxSourceBytes: 4 * 1024 * 1024,
      memoryBytes: undefined,
      maxProcesses: undefined,
      cpuSeconds: undefined,
      network: undefined,
    });
  });

  it('reads every flag, repeated ones in order', () => {
    const { stack } = run([
      'run',
      '-c',
      'x',
      '--lang',
      'r',
      '--timeout',
      '2m',
      '--interrupt-grace',
      '500ms',
      '--kill-grace',
      '1s',
      '--cwd',
      '/tmp/w',
      '--env',
      'A=1',
      '-e',
      'B=x=y',
      '--gateway',
      'http://127.0.0.1:8888/',
      '--token-env',
      'MY_TOKEN',
      '--hide',
      '/home/a',
      '--hide',
      '/srv',
      '--allow',
      '/home/a/p',
      '-o',
      'out',
      '--json',
      '--max-source-size',
      '512k',
      '--memory',
      '2G',
      '--max-processes',
      '64',
      '--cpu-time',
      '10m',
      '--no-network',
    ]);
    expect(stack).toEqual({
      language: 'r',
      timeoutMs: 120_000,
      interruptGraceMs: 500,
      killGraceMs: 1000,
      cwd: '/tmp/w',
      env: { A: '1', B: 'x=y' },
      gatewayUrl: 'http://127.0.0.1:8888',
      tokenEnv: 'MY_TOKEN',
      hide: ['/home/a', '/srv'],
      allow: ['/home/a/p'],
      outputsDir: 'out',
      json: true,
      maxSourceBytes: 512 * 1024,
      memoryBytes: 2 * 1024 ** 3,
      maxProcesses: 64,
      cpuSeconds: 600,
      network: false,
    });
  });

  it('limits sources to 4 MiB unless --max-source-size or KERNELWARDEN_MAX_SOURCE_SIZE says otherwise', () => {
    expect(run(['run', '-c', 'x']).stack.maxSourceBytes).toBe(4 * 1024 * 1024);
    const fromEnv = parseCommand(['run', '-c', 'x'], { env: { KERNELWARDEN_MAX_SOURCE_SIZE: '1M' } });
    expect(fromEnv.command === 'run' && fromEnv.stack.maxSourceBytes).toBe(1024 * 1024);
    expect(usage(['run', '-c', 'x', '--max-source-size', 'lots']).message).toBe(
      '--max-source-size "lots" is not a size from 1 byte to 256 MiB, e.g. 512k or 16M',
    );
    expect(usage(['repl', '--max-source-size', '0']).message).toMatch(/^--max-source-size "0" is not a size/);
  });

  it('takes a FILE, - for stdin, and infers R from a .R file', () => {
    expect(run(['run', 'job.py']).source).toEqual({ kind: 'file', path: 'job.py' });
    expect(run(['run', 'analysis.R']).stack.language).toBe('r');
    expect(run(['run', 'analysis.R', '--lang', 'python']).stack.language).toBe('python');
    expect(run(['run', '-']).source).toEqual({ kind: 'stdin' });
  });

  it('says what is wrong with --timeout 5x and gives an example', () => {
    const error = usage(['run', '-c', 'x', '--timeout', '5x']);
    expect(error.message).toBe(
      '--timeout "5x" is not a duration: use a number with a unit, e.g. 30s, 500ms or 2m (0 turns it off)',
    );
    expect(error.code).toBe('USAGE');
    expect(error.command).toBe('run');
  });

  it('accepts --timeout 0 as "off"', () => {
    expect(run(['run', '-c', 'x', '--timeout', '0']).stack.timeoutMs).toBe(0);
  });

  it('takes the graces from the environment, and names the variable when it is wrong', () => {
    const env = { KERNELWARDEN_INTERRUPT_GRACE: '1s', KERNELWARDEN_KILL_GRACE: '250ms' };
    const { stack } = run(['run', '-c', 'x'], env);
    expect([stack.interruptGraceMs, stack.killGraceMs]).toEqual([1000, 250]);
    expect(run(['run', '-c', 'x', '--kill-grace', '2s'], env).stack.killGraceMs).toBe(2000);
    expect(usage(['run', '-c', 'x'], { KERNELWARDEN_KILL_GRACE: 'soon' }).message).toMatch(
      /^KERNELWARDEN_KILL_GRACE "soon" is not a duration/,
    );
  });

  it('refuses a bad language, env pair, URL and token variable with the flag named', () => {
    expect(usage(['run', '-c', 'x', '--lang', 'julia']).message).toBe(
      '--lang "julia" is not a language: use python or r',
    );
    expect(usage(['run', '-c', 'x', '--env', 'NOVALUE']).message).toMatch(/^--env "NOVALUE" is not KEY=VALUE/);
    expect(usage(['run', '-c', 'x', '--env', '=1']).message).toMatch(/^--env "=1" is not KEY=VALUE/);
    expect(usage(['run', '-c', 'x', '--gateway', 'localhost:8888']).message).toMatch(/^--gateway must be an http/);
    expect(usage(['run', '-c', 'x', '--gateway', 'not a url']).message).toMatch(/^--gateway "not a url" is not a URL/);
    expect(usage(['run', '-c', 'x', '--token-env', 'my-token']).message).toMatch(/^--token-env must name/);
  });

  it('refuses a gateway URL that carries a token, without repeating it', () => {
    const error = usage(['run', '-c', 'x', '--gateway', 'http://127.0.0.1:8888/?token=s3cret']);
    expect(error.message).toMatch(/must not carry credentials/);
    expect(error.message).not.toContain('s3cret');
  });

  it('refuses --allow without --hide', () => {
    expect(usage(['run', '-c', 'x', '--allow', '/a']).message).toMatch(/--allow .* --hide/);
  });

  it('refuses nothing to run, two sources, unknown flags and missing values', () => {
    expect(usage(['run']).message).toMatch(/^nothing to run/);
    expect(usage(['run', 'a.py', '-c', 'x']).message).toMatch(/either FILE or -c CODE/);
    expect(usage(['run', 'a.py', 'b.py']).message).toMatch(/one FILE/);
    expect(usage(['run', '-c', 'x', '--tiemout', '3s']).message).toBe(
      'unknown option --tiemout; did you mean --timeout?',
    );
    expect(usage(['run', '-c', 'x', '--timeout']).message).toBe('--timeout needs a value');
  });
});

describe('parseCommand: run NOTEBOOK.ipynb', () => {
  it('reads -p NAME VALUE pairs in order, --output, --allow-errors, and the stack flags around them', () => {
    const command = run([
      'run',
      'report.ipynb',
      '-p',
      'alpha',
      '0.6',
      '-e',
      'P=-p',
      '--parameter',
      'region',
      'eu west',
      '--output',
      'out.ipynb',
      '--allow-errors',
      '-t',
      '30s',
    ]);
    expect(command.source).toEqual({
      kind: 'notebook',
      path: 'report.ipynb',
      output: 'out.ipynb',
      parameters: [
        ['alpha', '0.6'],
        ['region', 'eu west'],
      ],
      allowErrors: true,
      lang: undefined,
    });
    expect(command.stack.env).toEqual({ P: '-p' });
    expect(command.stack.timeoutMs).toBe(30_000);
  });

  it('writes over the input with --inplace, nothing without --output, and keeps an explicit --lang', () => {
    expect(run(['run', 'a.IPYNB', '--inplace']).source).toMatchObject({ kind: 'notebook', output: 'a.IPYNB' });
    expect(run(['run', 'a.ipynb']).source).toMatchObject({ kind: 'notebook', output: undefined, lang: undefined });
    expect(run(['run', 'a.ipynb', '--lang', 'r']).source).toMatchObject({ lang: 'r' });
  });

  it('refuses notebook flags without a notebook, --output with --inplace, a non-.ipynb output, --json and a lone -p', () => {
    expect(usage(['run', 'a.py', '-p', 'x', '1']).message).toBe('-p is for notebooks: give a NOTEBOOK.ipynb to run');
    expect(usage(['run', '-c', 'x', '--inplace']).message).toMatch(/^--inplace is for notebooks/);
    expect(usage(['run', 'a.ipynb', '--output', 'b.ipynb', '--inplace']).message).toMatch(/either --output/);
    expect(usage(['run', 'a.ipynb', '--output', 'b.json']).message).toMatch(/not a \.ipynb path/);
    expect(usage(['run', 'a.ipynb', '--json']).message).toMatch(/^--json is for scripts/);
    expect(usage(['run', 'a.ipynb', '-p', 'x']).message).toBe('-p takes a NAME and a VALUE, e.g. -p alpha 0.6');
  });
});

describe('parseCommand: the limit flags', () => {
  const MiB = 1024 * 1024;

  it('reads --memory as bytes in powers of 1024, alone or with --hide', () => {
    expect(run(['run', '-c', 'x', '--memory', '512M']).stack.memoryBytes).toBe(512 * MiB);
    expect(run(['run', '-c', 'x', '--memory', '2G']).stack.memoryBytes).toBe(2 * 1024 * MiB);
    expect(run(['run', '-c', 'x', '--memory', '1.5GiB']).stack.memoryBytes).toBe(1536 * MiB);
    expect(run(['run', '-c', 'x', '--memory', '256m']).stack.memoryBytes).toBe(256 * MiB);
    const both = run(['run', '-c', 'x', '--memory', '1G', '--hide', '/srv', '--allow', '/srv/in']).stack;
    expect([both.memoryBytes, both.hide, both.allow]).toEqual([1024 * MiB, ['/srv'], ['/srv/in']]);
  });

  it('refuses a --memory that is not a size, with an example', () => {
    expect(usage(['run', '-c', 'x', '--memory', 'lots']).message).toBe(
      '--memory "lots" is not a size: use a number with a unit, e.g. --memory 512M or --memory 2G',
    );
    expect(usage(['run', '-c', 'x', '--memory=-1G']).message).toMatch(/^--memory "-1G" is not a size/);
    expect(usage(['run', '-c', 'x', '--memory', '-1G']).message).toBe(
      '--memory needs a value, and one that starts with a dash goes as --memory=VALUE',
    );
    expect(usage(['run', '-c', 'x', '--memory', '2T']).message).toMatch(/^--memory "2T" is not a size/);
    const error = usage(['run', '-c', 'x', '--memory']);
    expect(error.message).toBe('--memory needs a value');
    expect(error.command).toBe('run');
  });

  it("refuses a --memory below the isolation package's minimum with its message", () => {
    expect(usage(['run', '-c', 'x', '--memory', '100M']).message).toBe(
      '--memory "100M": expected at least 268435456 bytes (256 MiB), e.g. --memory 512M',
    );
    // A bare number is bytes, so a forgotten unit is far below the minimum.
    expect(usage(['repl', '--memory', '512']).message).toMatch(/^--memory "512": expected at least 268435456 bytes/);
  });

  it('reads --max-processes as a whole number of at least the minimum', () => {
    expect(run(['run', '-c', 'x', '--max-processes', '64']).stack.maxProcesses).toBe(64);
    expect(run(['run', '-c', 'x', '--max-processes', '16']).stack.maxProcesses).toBe(16);
    for (const bad of ['many', '6.5', '-3', '1e3', '']) {
      expect(usage(['run', '-c', 'x', `--max-processes=${bad}`]).message).toBe(
        `--max-processes "${bad}" is not a whole number, e.g. --max-processes 64`,
      );
    }
    expect(usage(['run', '-c', 'x', '--max-processes', '8']).message).toBe(
      '--max-processes "8": expected at least 16, e.g. --max-processes 64',
    );
  });

  it('reads --cpu-time as whole seconds from a duration', () => {
    expect(run(['run', '-c', 'x', '--cpu-time', '90s']).stack.cpuSeconds).toBe(90);
    expect(run(['run', '-c', 'x', '--cpu-time', '10m']).stack.cpuSeconds).toBe(600);
    expect(run(['run', '-c', 'x', '--cpu-time', '1.5h']).stack.cpuSeconds).toBe(5400);
    expect(run(['run', '-c', 'x', '--cpu-time', '30']).stack.cpuSeconds).toBe(30);
    expect(run(['run', '-c', 'x', '--cpu-time', '2000ms']).stack.cpuSeconds).toBe(2);
  });

  it('refuses a --cpu-time that is no duration, under a second, not whole seconds, or past the maximum', () => {
    expect(usage(['run', '-c', 'x', '--cpu-time', 'soon']).message).toBe(
      '--cpu-time "soon" is not a duration: use a number with a unit, e.g. --cpu-time 10m or 90s',
    );
    for (const bad of ['0', '500ms', '1.5s', '2500ms']) {
      expect(usage(['run', '-c', 'x', '--cpu-time', bad]).message).toBe(
        `--cpu-time "${bad}" is not a whole number of seconds from 1s: CPU time is limited in seconds, e.g. --cpu-time 10m or 90s`,
      );
    }
    expect(usage(['run', '-c', 'x', '--cpu-time', '1000000h']).message).toBe(
      '--cpu-time "1000000h": expected at most 2^31 seconds, e.g. --cpu-time 10m',
    );
  });

  it('reads --no-network as network: false, and leaves the network alone without it', () => {
    expect(run(['run', '-c', 'x', '--no-network']).stack.network).toBe(false);
    expect(run(['run', '-c', 'x']).stack.network).toBeUndefined();
    expect(usage(['run', '-c', 'x', '--no-network=yes']).message).toMatch(/no-network/);
  });

  it('takes every limit flag on repl, demo and mcp too', () => {
    const flags = ['--memory', '1G', '--max-processes', '32', '--cpu-time', '1m', '--no-network'];
    for (const name of ['repl', 'demo', 'mcp'] as const) {
      const command = parseCommand([name, ...flags], { cwd: '/work' }) as Extract<Command, { command: typeof name }>;
      expect(command.stack, name).toMatchObject({
        memoryBytes: 1024 * MiB,
        maxProcesses: 32,
        cpuSeconds: 60,
        network: false,
      });
    }
    expect(usage(['mcp', '--memory', '1']).message).toMatch(/^--memory "1": expected at least/);
    expect(usage(['mcp', '--memory', '1']).command).toBe('mcp');
  });

  it('suggests the nearest known flag for an unknown one', () => {
    expect(usage(['run', '--language', 'r', '-c', 'x']).message).toBe(
      'unknown option --language; did you mean --lang?',
    );
    expect(usage(['run', '--output-dir', 'd', '-c', 'x']).message).toBe(
      'unknown option --output-dir; did you mean --outputs-dir?',
    );
    expect(usage(['repl', '--outputs', 'd']).message).toBe('unknown option --outputs; did you mean --outputs-dir?');
    expect(usage(['repl', '--max-image', '3']).message).toBe('unknown option --max-image; did you mean --max-images?');
    expect(usage(['run', '--frobnicate', '-c', 'x']).message).toBe('unknown option --frobnicate');
  });

  it('lets each command take only the flags its help lists', () => {
    for (const [command, flags] of Object.entries(COMMAND_OPTIONS)) {
      const help = helpText(command);
      for (const flag of flags) expect(help, `${command} --${flag}`).toContain(`--${flag}`);
    }
    expect(usage(['repl', '--json']).message).toBe('unknown option --json');
    expect(usage(['demo', '--gateway', 'http://127.0.0.1:1']).message).toMatch(/^unknown option --gateway/);
    expect(usage(['mcp', '--outputs-dir', 'x']).message).toMatch(/^unknown option --outputs-dir/);
    const repl = helpText('repl');
    expect(repl).not.toContain('--json');
    expect(repl).not.toContain('.R file');
    for (const flag of ['--json', '--lang', '--gateway', '--max-source-size', '--max-images'])
      expect(helpText('demo'), flag).not.toContain(flag);
  });

  it('lists every limit flag in the help of each command that starts kernels', () => {
    for (const topic of ['run', 'repl', 'mcp']) {
      const help = helpText(topic);
      for (const flag of ['--memory SIZE', '--max-processes N', '--cpu-time DURATION', '--no-network'])
        expect(help, `${topic} ${flag}`).toContain(flag);
      expect(help).toContain('exits 4');
    }
    expect(helpText('demo')).toContain('--memory and the other limits');
    expect(helpText()).toMatch(/4 isolation or a limit\s+unavailable/);
  });

  it('takes the limits from the environment, flags first, and names the variable when it is wrong', () => {
    const env = {
      KERNELWARDEN_MEMORY: '768M',
      KERNELWARDEN_MAX_PROCESSES: '100',
      KERNELWARDEN_CPU_TIME: '5m',
      KERNELWARDEN_NO_NETWORK: '1',
    };
    expect(run(['run', '-c', 'x'], env).stack).toMatchObject({
      memoryBytes: 768 * MiB,
      maxProcesses: 100,
      cpuSeconds: 300,
      network: false,
    });
    const mcp = parseCommand(['mcp', '--memory', '2G'], { env, cwd: '/work' });
    expect(mcp.command === 'mcp' && mcp.stack.memoryBytes).toBe(2048 * MiB);
    for (const off of ['0', 'false', 'no', 'off', '']) {
      expect(run(['run', '-c', 'x'], { KERNELWARDEN_NO_NETWORK: off }).stack.network).toBeUndefined();
    }
    expect(run(['run', '-c', 'x'], { KERNELWARDEN_NO_NETWORK: 'TRUE' }).stack.network).toBe(false);
    expect(usage(['run', '-c', 'x'], { KERNELWARDEN_MEMORY: 'big' }).message).toMatch(
      /^KERNELWARDEN_MEMORY "big" is not a size/,
    );
    expect(usage(['run', '-c', 'x'], { KERNELWARDEN_MAX_PROCESSES: '4' }).message).toMatch(
      /^KERNELWARDEN_MAX_PROCESSES "4": expected at least 16/,
    );
    expect(usage(['run', '-c', 'x'], { KERNELWARDEN_CPU_TIME: '100ms' }).message).toMatch(
      /^KERNELWARDEN_CPU_TIME "100ms" is not a whole number of seconds/,
    );
    expect(usage(['run', '-c', 'x'], { KERNELWARDEN_NO_NETWORK: 'maybe' }).message).toBe(
      'KERNELWARDEN_NO_NETWORK "maybe" is not on or off: use 1 to cut the kernels off the network, or 0',
    );
  });
});

describe('parseCommand: the other commands', () => {
  it('reads help, --help and --version', () => {
    expect(parseCommand([])).toEqual({ command: 'help', topic: undefined });
    expect(parseCommand(['--help'])).toEqual({ command: 'help', topic: undefined });
    expect(parseCommand(['help', 'run'])).toEqual({ command: 'help', topic: 'run' });
    expect(parseCommand(['run', '--help'])).toEqual({ command: 'help', topic: 'run' });
    expect(parseCommand(['--version'])).toEqual({ command: 'version' });
  });

  it('reads repl and demo with stack flags', () => {
    const repl = parseCommand(['repl', '--lang', 'r', '--timeout', '10s']) as Extract<Command, { command: 'repl' }>;
    expect(repl.stack.language).toBe('r');
    expect(repl.stack.timeoutMs).toBe(10_000);
    expect(parseCommand(['demo']).command).toBe('demo');
    expect(usage(['repl', 'extra']).message).toBe('repl takes no argument: "extra"');
  });

  it('reads doctor and gateway actions', () => {
    expect(parseCommand(['doctor', '--json'])).toEqual({ command: 'doctor', json: true });
    expect(parseCommand(['gateway', 'status'])).toEqual({
      command: 'gateway',
      action: 'status',
      json: false,
      lines: 50,
    });
    expect(parseCommand(['gateway', 'logs', '-n', '5'])).toMatchObject({ action: 'logs', lines: 5 });
    expect(usage(['gateway']).message).toMatch(/start, status, stop or logs/);
    expect(usage(['gateway', 'restart']).message).toBe(
      'unknown gateway action "restart": use start, status, stop or logs',
    );
    expect(usage(['gateway', 'logs', '-n', 'many']).message).toMatch(/--lines "many" is not a positive whole number/);
    expect(parseCommand(['gateway', 'logs', '--kernel', 'all'])).toMatchObject({ action: 'logs', kernel: 'all' });
    expect(parseCommand(['gateway', 'logs', '--kernel', 'ab-12'])).toMatchObject({ kernel: 'ab-12' });
    expect(usage(['gateway', 'logs', '--kernel', '../server']).message).toMatch(/is not a kernel id/);
    // The ids gateway-client accepts (KERNEL_ID_PATTERN), nothing that names another path.
    expect(parseCommand(['gateway', 'logs', '--kernel', 'a_b-1'])).toMatchObject({ kernel: 'a_b-1' });
    for (const bad of ['..', '.', 'a/b', '/etc/passwd', 'x'.repeat(129), '']) {
      expect(usage(['gateway', 'logs', '--kernel', bad]).message).toMatch(/is not a kernel id/);
    }
    expect(usage(['gateway', 'status', '--kernel', 'all']).message).toMatch(/--kernel goes with gateway logs/);
  });

  it('suggests the command meant', () => {
    expect(usage(['rnu']).message).toBe('unknown command "rnu"');
    expect(usage(['rpl']).message).toBe('unknown command "rpl"');
    expect(usage(['repel']).message).toBe('unknown command "repel"; did you mean "repl"?');
    expect(usage(['--timeout', '3s']).message).toMatch(/comes before a command/);
  });
});
