import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stripAnsi } from '@kernelwarden/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cliDirs, cliEnv, type Ran, runCli } from './cli-binary.test-fixture.js';

// `kernelwarden run` as the interpreter it stands in for: exit statuses, tracebacks, standard input.

let stateDir: string;
let workDir: string;

const cli = (args: string[], opts: { stdin?: Buffer | string; env?: Record<string, string> } = {}): Promise<Ran> =>
  runCli(args, { stateDir, cwd: workDir, ...opts });

/** IPython's own words around a SystemExit, which `python` never prints. */
const IPYTHON_NOISE = /An exception has occurred|To exit: use|UserWarning|Cell In/;

beforeAll(() => {
  ({ stateDir, workDir } = cliDirs('cli-script'));
});

afterAll(async () => {
  const stopped = await cli(['gateway', 'stop']);
  expect(stopped.code, stopped.stderr).toBe(0);
});

describe('kernelwarden run ends with the status a Python script asks for', () => {
  it('exits n for sys.exit(n) and raise SystemExit(n), running nothing after, without IPython noise', async () => {
    writeFileSync(join(workDir, 'exit3.py'), 'import sys\nprint("before")\nsys.exit(3)\nprint("after")\n');
    const file = await cli(['run', 'exit3.py']);
    expect(file).toEqual({ code: 3, stdout: 'before\n', stderr: '' });
    const raised = await cli(['run', '-c', 'def f():\n    raise SystemExit(42)\nf()']);
    expect(raised).toEqual({ code: 42, stdout: '', stderr: '' });
  });

  it("exits for exit(n) and quit() as python does: at once, 0 without a status, and a message's text on stderr with 1", async () => {
    const exited = await cli(['run', '-c', 'print("a")\nexit(4)\nprint("b")']);
    expect(exited).toEqual({ code: 4, stdout: 'a\n', stderr: '' });
    const quitted = await cli(['run', '-c', 'quit()\nprint("b")']);
    expect(quitted).toEqual({ code: 0, stdout: '', stderr: '' });
    const message = await cli(['run', '-c', 'import sys\nsys.exit("bye")']);
    expect(message.code).toBe(1);
    expect(message.stderr).toBe('bye\n');
    const json = await cli(['run', '--json', '-c', 'import sys\nsys.exit(7)']);
    expect(json.code).toBe(7);
    expect(JSON.parse(json.stdout)).toMatchObject({ exitCode: 7, error: { ename: 'SystemExit', evalue: '7' } });
  });

  it('exits 1 for an uncaught exception, with a traceback naming the file and line as python does', async () => {
    writeFileSync(join(workDir, 'fails.py'), 'import os\n\ndef f():\n    return 1 / 0\n\nf()\n');
    const ran = await cli(['run', 'fails.py']);
    expect(ran.code).toBe(1);
    expect(ran.stdout).toBe('');
    expect(ran.stderr).toMatch(
      new RegExp(
        `^Traceback \\(most recent call last\\):\\n  File "${join(workDir, 'fails.py')}", line 6, in <module>\\n    f\\(\\)\\n` +
          `  File "${join(workDir, 'fails.py')}", line 4, in f\\n    return 1 / 0\\n`,
      ),
    );
    expect(ran.stderr).toMatch(/ZeroDivisionError: division by zero\n$/);
    expect(ran.stderr).not.toMatch(IPYTHON_NOISE);
  });

  it('names -c code <string> and standard input <stdin>, syntax errors included', async () => {
    const code = await cli(['run', '-c', 'x = 1\nraise ValueError("no")']);
    expect(code.code).toBe(1);
    expect(code.stderr).toMatch(/^Traceback \(most recent call last\):\n {2}File "<string>", line 2, in <module>\n/);
    expect(code.stderr).toMatch(/ValueError: no\n$/);
    const stdin = await cli(['run', '-'], { stdin: 'y = 2\nprint(undefined_name)\n' });
    expect(stdin.code).toBe(1);
    expect(stdin.stderr).toMatch(/ {2}File "<stdin>", line 2, in <module>\n/);
    expect(stdin.stderr).toMatch(/NameError: name 'undefined_name' is not defined/);
    const eof = await cli(['run', '-c', 'x = 1\ninput()']);
    expect(eof.code).toBe(1);
    expect(eof.stderr).toMatch(/^Traceback \(most recent call last\):\n {2}File "<string>", line 2, in <module>\n/);
    expect(eof.stderr).toMatch(/\nEOFError\n$/);
    expect(eof.stderr).not.toContain('ipykernel');
    const syntax = await cli(['run', '-c', 'ok = 1\nx = )']);
    expect(syntax.code).toBe(1);
    expect(syntax.stderr).toMatch(/^ {2}File "<string>", line 2\n {4}x = \)\n\s+\^\nSyntaxError: /);
    expect(syntax.stderr).not.toMatch(IPYTHON_NOISE);
  });

  it('keeps what the code sees: __name__, IPython display of the last expression, the namespace', async () => {
    const ran = await cli(['run', '-c', 'import sys\nprint(__name__)\n6 * 7']);
    expect(ran).toEqual({ code: 0, stdout: '__main__\n42\n', stderr: '' });
  });
});

describe('kernelwarden run ends with the status an R script asks for', () => {
  it('exits n for quit(status = n) and q(status = n), running nothing after, without an error message', async () => {
    writeFileSync(join(workDir, 'exit3.R'), 'cat("before\\n")\nquit(status = 3)\ncat("after\\n")\n');
    const file = await cli(['run', 'exit3.R']);
    expect(file).toEqual({ code: 3, stdout: 'before\n', stderr: '' });
    const nested = await cli([
      'run',
      '--lang',
      'r',
      '-c',
      'f <- function() q(status = 5, save = "no")\nf()\ncat("after\\n")',
    ]);
    expect(nested).toEqual({ code: 5, stdout: '', stderr: '' });
    const plain = await cli(['run', '--lang', 'r', '-c', 'cat("x\\n")\nquit()']);
    expect(plain).toEqual({ code: 0, stdout: 'x\n', stderr: '' });
  });

  it('exits 1 for an uncaught error', async () => {
    const ran = await cli(['run', '--lang', 'r', '-c', 'stop("boom")']);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/boom/);
  });
});

describe('kernelwarden run names an R script in its tracebacks', () => {
  it('gives each call the file and line, the top-level call too, for a script with any text', async () => {
    const path = join(workDir, 'fails.R');
    writeFileSync(
      path,
      'greeting <- "héllo ✓ 😀"\nf <- function() {\n  g()\n}\ng <- function() stop("boom here")\ncat(greeting, "\\n")\nf()\ncat("after\\n")\n',
    );
    const ran = await cli(['run', 'fails.R']);
    expect(ran.code).toBe(1);
    expect(ran.stdout).toBe('héllo ✓ 😀 \n');
    const traceback = stripAnsi(ran.stderr);
    expect(traceback).toContain('boom here');
    expect(traceback).toContain(`1. f()   # at line 7 of file ${path}\n`);
    expect(traceback).toContain(`2. g()   # at line 3 of file ${path}\n`);
    expect(traceback).toContain(`3. stop("boom here")   # at line 5 of file ${path}`);
  });

  it('names -c code <string> and standard input <stdin>, and a syntax error its file and line', async () => {
    const code = await cli(['run', '--lang', 'r', '-c', 'x <- 1\nstop("top level")\ncat("after\\n")']);
    expect(code.code).toBe(1);
    expect(code.stdout).toBe('');
    expect(stripAnsi(code.stderr)).toContain('1. stop("top level")   # at line 2 of file <string>');
    const stdin = await cli(['run', '--lang', 'r', '-'], { stdin: 'x <- 1\n\nstop("piped")\n' });
    expect(stdin.code).toBe(1);
    expect(stripAnsi(stdin.stderr)).toContain('1. stop("piped")   # at line 3 of file <stdin>');
    const path = join(workDir, 'syntax.R');
    writeFileSync(path, 'x <- 1\ny <- )\n');
    const syntax = await cli(['run', 'syntax.R']);
    expect(syntax.code).toBe(1);
    expect(stripAnsi(syntax.stderr)).toContain(`${path}:2:6: unexpected ')'`);
    // The end of the input is where Rscript puts it: the line after the last.
    const unfinished = join(workDir, 'unfinished.R');
    writeFileSync(unfinished, 'x <- 1\ny <- (2\n');
    const eof = await cli(['run', 'unfinished.R']);
    expect(eof.code).toBe(1);
    expect(stripAnsi(eof.stderr)).toContain(`${unfinished}:3:0: unexpected end of input`);
  });
});

/**
 * Runs the binary in a pseudo-terminal (util-linux `script`, which passes what it reads to the terminal): each time
 * the screen shows `when`, types `text`. Resolves with the exit code and everything the terminal showed.
 */
function inTerminal(
  args: string[],
  answers: { when: string; text: string }[],
): Promise<{ code: number | null; screen: string }> {
  const quoted = [process.execPath, BIN, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
  return new Promise((resolvePromise, reject) => {
    const child = spawn('script', ['-q', '-f', '-e', '-c', quoted, '/dev/null'], {
      cwd: workDir,
      env: cliEnv(stateDir),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let screen = '';
    const pending = [...answers];
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      screen += chunk;
      const next = pending[0];
      if (next && screen.includes(next.when)) {
        pending.shift();
        child.stdin.write(next.text);
      }
    });
    const killer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(killer);
      resolvePromise({ code, screen });
    });
  });
}

const PYTHON_INPUT = [
  'name = input("name? ")',
  'print("hi", name)',
  'import getpass',
  'print("length", len(getpass.getpass("pw: ")))',
  'try:',
  '    input("more? ")',
  'except EOFError:',
  '    print("eof")',
].join('\n');

describe('kernelwarden run reads input() from its standard input', () => {
  it('from a pipe, a line per call, end of input as EOFError; R readline() too', async () => {
    const python = await cli(['run', '-c', PYTHON_INPUT], { stdin: 'bob\nhunter2\n' });
    expect(python.code, python.stderr).toBe(0);
    expect(python.stdout).toBe('name? hi bob\nlength 7\nmore? eof\n');
    expect(python.stderr).toBe('pw: ');
    const r = await cli(
      [
        'run',
        '--lang',
        'r',
        '-c',
        'x <- readline("n? ")\ncat("got", x, "\\n")\ny <- readline()\ncat("[", y, "]\\n", sep = "")',
      ],
      {
        stdin: 'ann\n',
      },
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('n? got ann \n[]\n');
  });

  it('from a terminal: the line typed, a password without echo', async () => {
    const { code, screen } = await inTerminal(
      ['run', '-c', PYTHON_INPUT],
      [
        { when: 'name? ', text: 'bob\r' },
        { when: 'pw: ', text: 'hunter2\r' },
        { when: 'more? ', text: '\x04' },
      ],
    );
    expect(code, screen).toBe(0);
    // Line editing moves the cursor between the prompt and the echo: compare the text.
    const text = stripAnsi(screen);
    expect(text).toContain('name? bob');
    expect(text).toContain('hi bob');
    expect(text).toMatch(/pw: \s*length 7/);
    expect(text).toContain('eof');
    expect(text).not.toContain('hunter2');
  });
});

describe('kernelwarden repl reads input() from its standard input', () => {
  it('takes the next piped line as the answer, and Python and R go on after it', async () => {
    const ran = await cli(['repl'], {
      stdin: [
        'x = input("name? ")',
        'bob',
        'print(x.upper())',
        'import getpass; p = getpass.getpass("pw: ")',
        'hunter2',
        'print(len(p))',
        ':r',
        'y <- readline("r? ")',
        'ann',
        'cat(toupper(y), "\\n")',
        '',
      ].join('\n'),
    });
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe('name? BOB\npw: 7\nr? ANN \n');
  });
});
