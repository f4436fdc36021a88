import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import {
  descendantsOf,
  type EnvMarker,
  identityOf,
  isProcessAlive,
  KERNEL_MARKER_ENV,
  kernelMarker,
  killProcessesCarrying,
  listProcesses,
  otherProcesses,
  processesCarrying,
  processesMentioning,
} from '../os.js';

async function until<T>(read: () => T, done: (value: T) => boolean): Promise<T> {
  let value = read();
  for (let i = 0; i < 200 && !done(value); i++) {
    await new Promise((r) => setTimeout(r, 25));
    value = read();
  }
  return value;
}

describe('the process table of real processes', () => {
  const children: ChildProcess[] = [];
  afterEach(async () => {
    for (const child of children.splice(0)) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await new Promise((r) => child.once('exit', r));
      }
    }
  });

  /** A shell carrying `env` that starts two sleeps, one of them in a process group of its own, and waits. */
  async function family(env: Record<string, string>): Promise<ChildProcess> {
    const child = spawn('sh', ['-c', 'sleep 300 & setsid sleep 301 & wait'], {
      stdio: 'ignore',
      env: { PATH: process.env.PATH ?? '', ...env },
    });
    children.push(child);
    await new Promise((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    return child;
  }

  it('lists every process, this one among them, and the others without it', () => {
    expect(listProcesses()).toContain(process.pid);
    expect(listProcesses()).toContain(1);
    expect(otherProcesses()).not.toContain(process.pid);
  });

  it('finds a shell and the processes it started by their marker, and kills them all by it', async () => {
    const marker: EnvMarker = { name: 'KW_TEST_MARKER', value: randomUUID() };
    const shell = await family({ KW_TEST_MARKER: marker.value! });
    const carrying = await until(
      () => processesCarrying(marker),
      (pids) => pids.length === 3,
    );
    expect(carrying).toHaveLength(3);
    expect(carrying).toContain(shell.pid);
    // Its two sleeps are its descendants, the one in a process group of its own too.
    expect(descendantsOf(shell.pid!).sort()).toEqual(carrying.filter((pid) => pid !== shell.pid).sort());
    // Neither another value nor only part of this one matches.
    expect(processesCarrying({ name: marker.name, value: 'other' })).toEqual([]);
    expect(processesCarrying({ name: marker.name, value: marker.value!.slice(1) })).toEqual([]);
    expect(processesCarrying({ name: marker.name, valuePrefix: marker.value!.slice(0, 8) }).sort()).toEqual(
      carrying.sort(),
    );
    expect(processesCarrying({ name: marker.name, valueSuffix: marker.value!.slice(-8) })).toHaveLength(3);
    expect(processesCarrying({ name: `${marker.name}_NOT` })).toEqual([]);

    const ids = carrying.map(identityOf);
    const exited = new Promise((r) => shell.once('exit', (_code, signal) => r(signal)));
    expect(killProcessesCarrying(marker).sort()).toEqual(carrying.sort());
    expect(await exited).toBe('SIGKILL');
    const left = await until(
      () => ids.filter(isProcessAlive),
      (alive) => alive.length === 0,
    );
    expect(left).toEqual([]);
    expect(processesCarrying(marker)).toEqual([]);
    expect(killProcessesCarrying(marker)).toEqual([]);
  });

  it('asks them once with another signal', async () => {
    const marker: EnvMarker = { name: 'KW_TEST_MARKER', value: randomUUID() };
    const shell = await family({ KW_TEST_MARKER: marker.value! });
    const carrying = await until(
      () => processesCarrying(marker),
      (pids) => pids.length === 3,
    );
    const exited = new Promise((r) => shell.once('exit', (_code, signal) => r(signal)));
    expect(killProcessesCarrying(marker, { signal: 'SIGTERM' }).sort()).toEqual(carrying.sort());
    expect(await exited).toBe('SIGTERM');
    const left = await until(
      () => processesCarrying(marker),
      (pids) => pids.length === 0,
    );
    expect(left).toEqual([]);
  });

  it("finds a kernel's processes by the embedded gateway's marker, by kernel id or by server run", async () => {
    const instance = randomUUID();
    const kernelId = randomUUID();
    const shell = await family({ [KERNEL_MARKER_ENV]: `${instance}:${kernelId}` });
    const other = await family({ [KERNEL_MARKER_ENV]: `${instance}:${randomUUID()}` });
    const pids = await until(
      () => processesCarrying(kernelMarker({ instance })),
      (found) => found.length === 6,
    );
    expect(pids).toHaveLength(6);
    const ofKernel = processesCarrying(kernelMarker({ kernelId }));
    expect(ofKernel).toHaveLength(3);
    expect(ofKernel).toContain(shell.pid);
    expect(ofKernel).not.toContain(other.pid);
    expect(processesCarrying(kernelMarker({ instance, kernelId })).sort()).toEqual(ofKernel.sort());
    expect(processesCarrying(kernelMarker({ instance: randomUUID(), kernelId }))).toEqual([]);
  });

  it('finds a process by its command line', async () => {
    const word = `kw-${randomUUID()}`;
    // A process that starts none of its own (a shell forks for `sleep`, and its fork carries the same command line).
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 300_000)', word], { stdio: 'ignore' });
    children.push(child);
    const found = await until(
      () => processesMentioning(word),
      (pids) => (pids?.length ?? 0) > 0,
    );
    expect(found).toEqual([child.pid]);
    expect(processesMentioning(randomUUID())).toEqual([]);
  });

  it('gives a process with no children no descendants', () => {
    expect(descendantsOf(2 ** 22 + 1)).toEqual([]);
  });
});
