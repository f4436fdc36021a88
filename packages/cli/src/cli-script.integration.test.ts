import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliDirs, type Ran, runCli } from './cli-binary.test-fixture.js';

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
