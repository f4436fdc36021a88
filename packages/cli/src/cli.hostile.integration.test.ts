import { spawn } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, cliDirs, cliEnv, type Ran, runCli } from './cli-binary.test-fixture.js';

// Hostile input files and hostile kernel output, through the built binary on the real embedded gateway.

let stateDir: string;
let workDir: string;

const cli = (
  args: string[],
  opts: { stdin?: Buffer | string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<Ran> => runCli(args, { stateDir, cwd: workDir, ...opts });

/** Raw control sequences a terminal acts on (SGR colours excepted): OSC, DCS, APC, PM, SOS, other CSI, C1. */
const RAW_CONTROL = /\x1b[\]P_^X]|\x1b\[[0-9;?]*[A-La-ln-z]|[\x80-\x9f\x07\x08]/;

/** Runs the binary in a pseudo-terminal (util-linux `script`); resolves with everything the terminal received. */
function inTerminal(args: string[]): Promise<{ code: number | null; screen: string }> {
  const quoted = [process.execPath, BIN, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
  return new Promise((resolvePromise, reject) => {
    const child = spawn('script', ['-q', '-f', '-e', '-c', quoted, '/dev/null'], {
      cwd: workDir,
      env: cliEnv(stateDir),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    const killer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(killer);
      resolvePromise({ code, screen: Buffer.concat(chunks).toString('utf8') });
    });
  });
}

beforeAll(() => {
  ({ stateDir, workDir } = cliDirs('cli-hostile'));
});

afterAll(async () => {
  // The embedded gateway outlives each `run` by its linger: stop it so no server or kernel survives the suite.
  const stopped = await cli(['gateway', 'stop']);
  expect(stopped.code, stopped.stderr).toBe(0);
});

describe('kernelwarden run refuses sources it cannot send as they are (exit 2)', () => {
  it('refuses a file with a NUL byte, naming the file and where', async () => {
    writeFileSync(join(workDir, 'nul.py'), 'print(1)\nx = 1\0\n');
    const ran = await cli(['run', 'nul.py']);
    expect(ran.code).toBe(2);
    expect(ran.stdout).toBe('');
    expect(ran.stderr).toMatch(/^kernelwarden: nul\.py contains a NUL byte \(line 2, byte 6\)/);
  });

  it('refuses UTF-16 (with a byte-order mark) and Latin-1 files, saying to save them as UTF-8', async () => {
    writeFileSync(
      join(workDir, 'wide.py'),
      Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('print(1)\n', 'utf16le')]),
    );
    const wide = await cli(['run', 'wide.py']);
    expect(wide.code).toBe(2);
    expect(wide.stderr).toMatch(/^kernelwarden: wide\.py is UTF-16 or UTF-32 .*save it as UTF-8/);

    writeFileSync(join(workDir, 'latin.py'), Buffer.from('print("caf\xe9")\n', 'latin1'));
    const latin = await cli(['run', 'latin.py', '--json']);
    expect(latin.code).toBe(2);
    expect(latin.stderr).toMatch(/^kernelwarden: latin\.py is not valid UTF-8 \(byte 0xe9 at line 1, byte 11\)/);
    expect(JSON.parse(latin.stdout)).toMatchObject({
      exitCode: 2,
      status: 'failed',
      error: { code: 'INVALID_SOURCE' },
    });
  });

  it('refuses /dev/zero and a source over --max-source-size with a message, without running out of memory', async () => {
    const zero = await cli(['run', '/dev/zero']);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toBe(
      'kernelwarden: /dev/zero is larger than the source limit of 4 MiB: pass --max-source-size to raise it\n',
    );
    const code = await cli(['run', '--max-source-size', '16', '-c', 'print("seventeen bytes")']);
    expect(code.code).toBe(2);
    expect(code.stderr).toMatch(/^kernelwarden: -c CODE is larger than the source limit of 16 bytes/);
  });

  it('applies the same checks to standard input', async () => {
    const nul = await cli(['run', '-'], { stdin: Buffer.from('print(1)\0\n') });
    expect(nul.code).toBe(2);
    expect(nul.stderr).toMatch(/^kernelwarden: standard input contains a NUL byte \(line 1, byte 9\)/);
    const big = await cli(['run', '-'], {
      stdin: Buffer.alloc(2 * 1024 * 1024, 0x20),
      env: { KERNELWARDEN_MAX_SOURCE_SIZE: '1M' },
    });
    expect(big.code).toBe(2);
    expect(big.stderr).toMatch(/^kernelwarden: standard input is larger than the source limit of 1 MiB/);
  });

  it('applies them to each repl cell, refusing the cell and going on', async () => {
    const input = Buffer.concat([
      Buffer.from('print(40 + 1)\n'),
      Buffer.from([0x78, 0x20, 0x3d, 0x20, 0x27, 0xff, 0x27, 0x0a]), // x = '\xff'
      Buffer.from('y = 1\0\n'),
      Buffer.from('print(40 + 2)\n'),
    ]);
    const ran = await cli(['repl'], { stdin: input });
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe('41\n42\n');
    expect(ran.stderr).toMatch(/kernelwarden: the repl input is not valid UTF-8: the cell was not run/);
    expect(ran.stderr).toMatch(/kernelwarden: the repl input contains a NUL character \(line 1\)/);
  });
});

describe('kernelwarden shows hostile kernel output escaped', () => {
  const HOSTILE_PRINT = [
    'print("\\x1b]0;pwned\\x07|\\x1b]52;c;aGk=\\x07|\\x1b[2J|\\x9b6n|\\x1bP+q544e\\x1b\\\\|\\x1b[31mred\\x1b[0m")',
    'raise ValueError("\\x1b]0;tb\\x07")',
  ].join('\n');

  it('in a pipe: every control sequence as text, colours removed, tracebacks too', async () => {
    const ran = await cli(['run', '-c', HOSTILE_PRINT]);
    expect(ran.code).toBe(1);
    expect(ran.stdout).toBe('\\x1b]0;pwned\\x07|\\x1b]52;c;aGk=\\x07|\\x1b[2J|\\x9b6n|\\x1bP+q544e\\x1b\\|red\n');
    expect(ran.stderr).toContain('ValueError: \\x1b]0;tb\\x07');
    expect(ran.stdout + ran.stderr).not.toMatch(/[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]/);
  });

  it('in a terminal: colours kept, titles, clipboard writes, screen clears, DCS and C1 shown as text', async () => {
    const { code, screen } = await inTerminal(['run', '-c', HOSTILE_PRINT]);
    expect(code).toBe(1);
    expect(screen).toContain('\\x1b]0;pwned\\x07|\\x1b]52;c;aGk=\\x07|\\x1b[2J|\\x9b6n|\\x1bP+q544e\\x1b\\|');
    expect(screen).toContain('\x1b[31mred\x1b[0m');
    expect(screen).toContain('\\x1b]0;tb\\x07');
    // The spinner's own line clearing (`\r ESC[2K`) is the CLI's, not the kernel's.
    expect(screen.replaceAll('\x1b[2K', '')).not.toMatch(RAW_CONTROL);
  });

  it("gateway logs shows what a kernel wrote to its own log escaped, and the server's log never holds it", async () => {
    const marker = `kw-log-${process.pid}`;
    const ran = await cli(['run', '-c', `import os\nos.write(2, b"\\x1b]0;${marker}\\x07\\x1b[2J\\n")\nNone`]);
    expect(ran.code, ran.stderr).toBe(0);
    const logs = await cli(['gateway', 'logs', '--kernel', 'all', '--lines', '2000']);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toContain(`\\x1b]0;${marker}\\x07\\x1b[2J`);
    expect(logs.stdout).not.toMatch(/[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]/);
    const server = await cli(['gateway', 'logs', '--lines', '100000']);
    expect(server.code).toBe(0);
    expect(server.stdout).not.toContain(marker);
  });
});

describe('kernelwarden run when the kernel dies under the cell', () => {
  it('exits 5 and says the kernel died and was restarted when the cell calls os._exit(1)', async () => {
    const ran = await cli(['run', '-c', 'import os\nos._exit(1)']);
    expect(ran.code, ran.stderr).toBe(5);
    expect(ran.stderr).toMatch(
      /^kernelwarden: Kernel .* died while the cell ran; the server restarted it, so its variables are gone/,
    );
  });

  it('exits 5 when the kernel process is killed -9, and --json says KERNEL_DIED', async () => {
    const ran = await cli(['run', '--json', '-c', 'import os, signal\nos.kill(os.getpid(), signal.SIGKILL)']);
    expect(ran.code, ran.stderr).toBe(5);
    expect(JSON.parse(ran.stdout)).toMatchObject({ exitCode: 5, status: 'failed', error: { code: 'KERNEL_DIED' } });
  });
});

/** A cell that displays `count` images of `bytes` random bytes each, then prints `done`. */
function imageFlood(count: number, bytes: number): string {
  return [
    'import base64, os',
    'from IPython.display import display',
    `payload = base64.b64encode(os.urandom(${bytes})).decode()`,
    `for _ in range(${count}):`,
    "    display({'image/png': payload, 'text/plain': '<image>'}, raw=True)",
    "print('done')",
  ].join('\n');
}

describe('kernelwarden run writes all of its output to a slow reader', () => {
  it('exits only once a pipe nobody reads for seconds has taken everything', async () => {
    const child = spawn(process.execPath, [BIN, 'run', '-c', 'print("x" * 4_000_000)'], {
      cwd: workDir,
      env: cliEnv(stateDir),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const closed = new Promise<number | null>((resolveClose) => child.on('close', resolveClose));
    // Read nothing for 5 s: the command finishes meanwhile, its output still queued behind a full pipe.
    child.stdout.pause();
    await new Promise((r) => setTimeout(r, 5000));
    let received = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      received += chunk.length;
    });
    child.stdout.resume();
    child.stderr.resume();
    expect(await closed).toBe(0);
    expect(received).toBe(4_000_001);
  }, 60_000);
});

describe('kernelwarden run bounds the images a cell makes it keep', () => {
  it('saves at most 100 images per cell by default and says how many it did not save', async () => {
    const dir = join(workDir, 'flood-count');
    const ran = await cli(['run', '--outputs-dir', dir, '-c', imageFlood(130, 1024)]);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe('done\n');
    expect(readdirSync(dir)).toHaveLength(100);
    expect(ran.stderr).toContain(
      'kernelwarden: 30 image outputs not saved: past --max-images 100 (pass --max-images N to keep more)\n',
    );
  });

  it('saves at most --max-images-size bytes of images per cell, and --json says what was not saved', async () => {
    const dir = join(workDir, 'flood-size');
    const ran = await cli([
      'run',
      '--json',
      '--outputs-dir',
      dir,
      '--max-images-size',
      '1M',
      '--max-images',
      '1000',
      '-c',
      imageFlood(8, 300 * 1024),
    ]);
    expect(ran.code, ran.stderr).toBe(0);
    expect(readdirSync(dir)).toHaveLength(3);
    const doc = JSON.parse(ran.stdout);
    expect(doc).toMatchObject({ exitCode: 0, status: 'ok', stdout: 'done\n', imagesNotSaved: 5 });
    expect(doc.files).toHaveLength(3);
    expect(doc.notes).toContain(
      '5 image outputs not saved: past --max-images-size 1 MiB of images for the cell (pass --max-images-size SIZE to keep more)',
    );
  });

  it('writes the --json report of a cell with more image data than a result keeps, the outputs past it left out', async () => {
    // 200 images of 2 MiB (2.8 MB of base64 each): 560 MB of output data, past the longest string V8 can make. The
    // result keeps its first 32 MiB of rich outputs (gateway-client's maxOutputBytes) and says it was truncated; the
    // report (which would elide past 64 MiB of output data) is written whole.
    const ran = await cli(['run', '--json', '-c', imageFlood(200, 2 * 1024 * 1024)], { timeoutMs: 180_000 });
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout.length).toBeLessThan(70 * 1024 * 1024);
    const doc = JSON.parse(ran.stdout);
    expect(doc).toMatchObject({ exitCode: 0, status: 'ok', stdout: 'done\n', truncated: true, imagesNotSaved: 200 });
    const images = doc.outputs.filter((o: { type: string }) => o.type === 'display_data');
    expect(images.length).toBeGreaterThan(0);
    expect(images.length).toBeLessThan(200);
  }, 240_000);
});
