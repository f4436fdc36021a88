import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  bootId,
  currentProcess,
  identityOf,
  isProcessAlive,
  parseProcStat,
  pidNamespace,
  processCmdline,
  processEnviron,
  processEnvironHas,
  processStartTime,
  processStat,
  processUid,
} from '../os.js';

/** The fields after the command name of a real stat line (state S, parent 1, start time 4242 in field 22). */
const REST = 'S 1 100 100 0 -1 4194560 200 0 0 0 1 2 0 0 20 0 1 0 4242 9000000 500 18446744073709551615 1 1 0 0 0';

describe('parseProcStat', () => {
  it('reads pid, command name, state, parent and start time (field 22)', () => {
    expect(parseProcStat(`77 (sleep) ${REST}\n`)).toEqual({
      pid: 77,
      comm: 'sleep',
      state: 'S',
      ppid: 1,
      startTime: '4242',
    });
  });

  it('keeps a command name holding ")", spaces and what looks like more fields whole', () => {
    const comm = 'x) Z 9 9 9 9 (';
    expect(parseProcStat(`77 (${comm}) ${REST}\n`)).toMatchObject({ comm, state: 'S', ppid: 1, startTime: '4242' });
    expect(parseProcStat(`77 ()) ${REST}`)).toMatchObject({ comm: ')', startTime: '4242' });
    expect(parseProcStat(`77 ((() ${REST}`)).toMatchObject({ comm: '((', startTime: '4242' });
  });

  it('keeps a command name holding newlines whole', () => {
    const comm = 'a\nb) R 5\n';
    expect(parseProcStat(`77 (${comm}) ${REST}\n`)).toMatchObject({ comm, state: 'S', ppid: 1, startTime: '4242' });
  });

  it('refuses text that is not a stat line', () => {
    expect(parseProcStat('')).toBeUndefined();
    expect(parseProcStat('77 sleep S 1')).toBeUndefined();
    expect(parseProcStat('77 (sleep) S 1 2 3')).toBeUndefined(); // no field 22
    expect(parseProcStat(`x (sleep) ${REST}`)).toBeUndefined();
    expect(parseProcStat(`77 (sleep) ${REST.replace('4242', '42x')}`)).toBeUndefined();
    expect(parseProcStat(`77 (sleep) ${REST.replace('S 1', 'S x')}`)).toBeUndefined();
  });
});

describe('process facts of real processes', () => {
  const children: ChildProcess[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    for (const child of children.splice(0)) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await new Promise((r) => child.once('exit', r));
      }
    }
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  async function started(command: string, args: string[], env?: NodeJS.ProcessEnv): Promise<ChildProcess> {
    const child = spawn(command, args, { stdio: 'ignore', ...(env ? { env } : {}) });
    children.push(child);
    await new Promise((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    return child;
  }

  it('reads the stat of a process whose name holds ")", a space and a newline', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kw-proc-'));
    dirs.push(dir);
    // The kernel names a process after the file it executes (15 bytes at most): this one as a hostile stat line.
    const name = 'k) Z 1 2\n) 3 (';
    symlinkSync('/bin/sleep', join(dir, name));
    const child = await started(join(dir, name), ['30']);
    const pid = child.pid!;
    let stat = processStat(pid);
    for (let i = 0; i < 100 && typeof stat === 'object' && stat.comm !== name; i++) {
      await new Promise((r) => setTimeout(r, 20)); // until the exec is done
      stat = processStat(pid);
    }
    expect(stat).toMatchObject({ pid, comm: name, ppid: process.pid });
    expect(typeof stat === 'object' && stat.state).not.toBe('Z');
    expect(processStartTime(pid)).toMatch(/^\d+$/);
    // Started after this process.
    expect(BigInt(processStartTime(pid)!)).toBeGreaterThanOrEqual(BigInt(currentProcess().startTime!));
  });

  it('tells a live process from an exited one and from a reused pid', async () => {
    const child = await started('sleep', ['30']);
    const id = identityOf(child.pid!);
    expect(id.startTime).toMatch(/^\d+$/);
    expect(isProcessAlive(id)).toBe(true);
    expect(isProcessAlive({ pid: id.pid })).toBe(true);
    expect(isProcessAlive({ pid: id.pid, startTime: `${id.startTime}1` })).toBe(false); // another process's pid
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(isProcessAlive(id)).toBe(false);
    expect(processStat(id.pid)).toBe('gone');
    // An identity taken once the process is gone matches nothing, a later process on that pid included.
    expect(identityOf(id.pid)).toEqual({ pid: id.pid, startTime: 'gone' });
    expect(isProcessAlive({ pid: 0 })).toBe(false);
    expect(isProcessAlive({ pid: -1 })).toBe(false);
  });

  it('reads a process command line, environment and uid', async () => {
    const child = await started('sleep', ['30'], { PATH: process.env.PATH ?? '', KW_PROC_TEST: 'a b=c' });
    const pid = child.pid!;
    for (let i = 0; i < 100 && processCmdline(pid)?.[0] !== 'sleep'; i++) await new Promise((r) => setTimeout(r, 20));
    expect(processCmdline(pid)).toEqual(['sleep', '30']);
    expect(processEnviron(pid)).toContain('KW_PROC_TEST=a b=c');
    expect(processEnvironHas(pid, 'KW_PROC_TEST=a b=c')).toBe(true);
    expect(processEnvironHas(pid, 'KW_PROC_TEST=a')).toBe(false);
    expect(processUid(pid)).toBe(process.getuid?.());
    expect(processCmdline(2 ** 22 + 1)).toBeUndefined();
    expect(processEnvironHas(2 ** 22 + 1, 'A=b')).toBeUndefined();
  });

  it("names this boot and this process's PID namespace", () => {
    expect(bootId()).toMatch(/^[0-9a-f-]{36}$/);
    expect(pidNamespace()).toMatch(/^pid:\[\d+\]$/);
  });
});
