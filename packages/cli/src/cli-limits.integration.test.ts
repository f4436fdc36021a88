import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { PROCESS_STORM_CELL, testGateway } from '@kernelwarden/test-env';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BIN,
  cliDirs,
  gatewayKernelIds,
  isolatedSpecs,
  leftoverKernelCgroups,
  type Ran,
  runCli,
} from './cli-binary.test-fixture.js';

// The limit flags end to end: the built binary, its embedded gateway (a state directory of this file's own), real
// bubblewrap, and this machine's cgroups (root here: writable cgroup v1 memory and pids hierarchies).

const MiB = 1024 * 1024;
let stateDir: string;
let workDir: string;

beforeAll(() => {
  ({ stateDir, workDir } = cliDirs('cli-limits'));
});

afterAll(async () => {
  // Every run removed its kernelspec and, with it, its kernels' empty cgroups: none may be left, before the gateway
  // goes (stopping it removes no cgroup).
  const left = leftoverKernelCgroups(stateDir);
  const stopped = await runCli(['gateway', 'stop'], { stateDir, cwd: workDir });
  expect(stopped.code, stopped.stderr).toBe(0);
  expect(left).toEqual([]);
  expect(gatewayKernelIds(stateDir).length).toBeGreaterThan(0);
});

function cli(args: string[], opts: { stdin?: string; timeoutMs?: number } = {}): Promise<Ran> {
  return runCli(args, { stateDir, cwd: workDir, ...opts });
}

describe('kernelwarden run --memory', () => {
  it('fails a 2 GB allocation under 512M in the cell: exit 1 with MemoryError', async () => {
    const ran = await cli(['run', '--memory', '512M', '-c', 'bytearray(2*1024**3)']);
    expect(ran.code, ran.stderr).toBe(1);
    expect(ran.stderr).toMatch(/MemoryError/);
    expect(ran.stdout).toBe('');
    expect(isolatedSpecs(stateDir)).toEqual([]);
  });

  it('exits 5 and says the kernel was killed for its memory limit when the cgroup kills it', async () => {
    // A shared mapping is outside RLIMIT_DATA: touching 2 GB of it is stopped by the memory cgroup, which kills.
    const code = 'import mmap\nm = mmap.mmap(-1, 2 << 30)\nfor i in range(0, 2 << 30, 4096):\n    m[i] = 1';
    const ran = await cli(['run', '--memory', '512M', '-c', code], { timeoutMs: 120_000 });
    expect(ran.code, ran.stderr).toBe(5);
    expect(ran.stderr).toMatch(
      /killed for using more than its memory limit \(512 MiB\); the server restarted it, so its variables are gone/,
    );
  });

  it('keeps the kernel working after the failed allocation: the next statement runs', async () => {
    const code = [
      'try:',
      '    b = bytearray(2*1024**3)',
      "    print('allocated')",
      'except MemoryError:',
      "    print('MemoryError caught')",
      'print(sum(range(10)))',
    ].join('\n');
    const ran = await cli(['run', '--memory', '512M', '-c', code]);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe('MemoryError caught\n45\n');
  });
});

/** Python that prints the kernel's data and CPU rlimits and the memory limit of the cgroup holding it. */
const READ_LIMITS =
  "import resource; print(label, resource.getrlimit(resource.RLIMIT_DATA), resource.getrlimit(resource.RLIMIT_CPU), [open(f'/sys/fs/cgroup/memory{l.split(\":\")[2].strip()}/../memory.limit_in_bytes').read().strip() for l in open('/proc/self/cgroup') if ':memory:' in l])";

describe('kernelwarden repl with limits', () => {
  it('keeps every limit after a watchdog reset, and gives them to the R kernel too', async () => {
    const input = [
      'bytearray(2*1024**3)',
      "kept = 1; print('next cell', sum(range(10)))",
      `label = 'before'; ${READ_LIMITS}`,
      // Ignores SIGINT: the watchdog interrupts, then kills and restarts the kernel (a new interpreter).
      "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('ignoring SIGINT', flush=True); [time.sleep(0.1) for _ in iter(int, 1)]",
      `label = 'after reset'; ${READ_LIMITS}`,
      "print('state kept' if 'kept' in globals() else 'fresh interpreter')",
      'bytearray(2*1024**3)',
      ':r',
      'x <- numeric(2.7e8)',
      'cat("R next cell", sum(0:9), "\\n")',
      '',
    ].join('\n');
    const ran = await cli(
      [
        'repl',
        '--memory',
        '512M',
        '--cpu-time',
        '10m',
        '--timeout',
        '3s',
        '--interrupt-grace',
        '500ms',
        '--kill-grace',
        '500ms',
      ],
      { stdin: input, timeoutMs: 240_000 },
    );
    expect(ran.code, ran.stderr).toBe(0);
    const lines = ran.stdout.split('\n');
    const limits = (label: string) => lines.find((l) => l.startsWith(`${label} `));
    const expected = `(${512 * MiB}, ${512 * MiB}) (600, 600) ['${512 * MiB}']`;
    expect(limits('before')).toBe(`before ${expected}`);
    expect(limits('after reset')).toBe(`after reset ${expected}`);
    expect(lines).toContain('next cell 45');
    expect(lines).toContain('ignoring SIGINT');
    expect(lines).toContain('fresh interpreter');
    expect(ran.stderr).toMatch(/the kernel was restarted; earlier variables are gone/);
    // Both allocations failed in their cells, before and after the reset; R's too, and its next cell ran.
    expect(ran.stderr.match(/MemoryError/g)?.length).toBeGreaterThanOrEqual(2);
    expect(ran.stderr).toMatch(/cannot allocate vector of size/);
    expect(lines).toContain('R next cell 45 ');
  }, 300_000);
});

describe('kernelwarden run --no-network', () => {
  let server: Server;
  let accepted = 0;
  let port: number;
  beforeAll(async () => {
    server = createServer((socket) => {
      accepted++;
      socket.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  const connect = () =>
    [
      'import socket',
      'try:',
      `    socket.create_connection(('127.0.0.1', ${port}), timeout=10).close()`,
      "    print('connected')",
      'except OSError as e:',
      "    print('refused', type(e).__name__)",
    ].join('\n');

  it("cannot reach a listener on this machine's 127.0.0.1, which the same run without the flag reaches", async () => {
    const cut = await cli(['run', '--no-network', '-c', connect()]);
    expect(cut.code, cut.stderr).toBe(0);
    expect(cut.stdout).toMatch(/^refused /);
    expect(accepted).toBe(0);
    const open = await cli(['run', '-c', connect()]);
    expect(open.code, open.stderr).toBe(0);
    expect(open.stdout).toBe('connected\n');
    expect(accepted).toBe(1);
  });
});

describe('kernelwarden run --max-processes', () => {
  it('stops a storm of 300 subprocesses under 64, and the kernel keeps working', async () => {
    const storm = `${PROCESS_STORM_CELL}\nprint(sum(range(10)))`;
    const ran = await cli(['run', '--max-processes', '64', '-c', storm]);
    expect(ran.code, ran.stderr).toBe(0);
    const [counts, after] = ran.stdout.trim().split('\n');
    const [started, refused] = (counts ?? '').split(' ').map(Number);
    expect(started).toBeLessThan(64);
    expect(started! + refused!).toBe(300);
    expect(refused).toBeGreaterThan(200);
    expect(after).toBe('45');
  });
});

/** The mount points of the cgroup hierarchies holding the pids controller (v1 `pids`, or the v2 hierarchy). */
function pidsMounts(): string[] {
  const mounts: string[] = [];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [left, right] = line.split(' - ');
    if (!left || !right) continue;
    const point = left.split(' ')[4]!;
    const [type, , options = ''] = right.split(' ');
    if ((type === 'cgroup' && options.split(',').includes('pids')) || type === 'cgroup2') mounts.push(point);
  }
  return [...new Set(mounts)];
}

describe('kernelwarden with a limit nothing here can enforce', () => {
  it('exits 4 before any kernel starts, naming the limit and why: as root, with the pids cgroups read-only', async () => {
    // Root (as here) without a writable pids cgroup: Linux does not enforce RLIMIT_NPROC for root, so nothing can
    // hold --max-processes. Staged by running the command in a mount namespace of its own where every pids
    // hierarchy is bound read-only; the embedded gateway it starts runs there too.
    expect(process.getuid?.()).toBe(0);
    const own = cliDirs('cli-limits-ro');
    const mounts = pidsMounts();
    expect(mounts.length).toBeGreaterThan(0);
    const readOnly = mounts.map((m) => `mount --bind '${m}' '${m}' && mount -o remount,bind,ro '${m}'`).join(' && ');
    const probe = spawnSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', `${readOnly} && true`]);
    expect(probe.status, probe.stderr.toString()).toBe(0);
    try {
      const ran = await runCli(
        [
          '--mount',
          '--propagation',
          'private',
          'sh',
          '-c',
          `${readOnly} && exec "$@"`,
          'sh',
          process.execPath,
          BIN,
          'run',
          '--max-processes',
          '64',
          '-c',
          'print(1)',
        ],
        { stateDir: own.stateDir, cwd: own.workDir, program: 'unshare' },
      );
      expect(ran.code, ran.stderr).toBe(4);
      expect(ran.stdout).toBe('');
      expect(ran.stderr).toContain(
        'kernelwarden: The kernel was not started: its process limit (maxProcesses) cannot be enforced here: no writable pids cgroup',
      );
      expect(ran.stderr).toContain('Linux does not enforce RLIMIT_NPROC for root');
      expect(ran.stderr).toContain("Run 'kernelwarden doctor' to see which limits can be enforced here, and by what.");
      // Nothing was launched or written: no kernel ever ran on that gateway, and no kernelspec is left.
      expect(gatewayKernelIds(own.stateDir)).toEqual([]);
      expect(isolatedSpecs(own.stateDir)).toEqual([]);
    } finally {
      const stopped = await runCli(['gateway', 'stop'], { stateDir: own.stateDir, cwd: own.workDir });
      expect(stopped.code, stopped.stderr).toBe(0);
    }
  });

  it('exits 4 for limits on a remote --gateway, saying they need the embedded gateway', async () => {
    const gateway = testGateway();
    const ran = await runCli(
      ['run', '--gateway', gateway.baseUrl, '--memory', '1G', '--no-network', '-c', 'print(1)'],
      {
        stateDir,
        cwd: workDir,
        env: { KERNELWARDEN_GATEWAY_TOKEN: gateway.token },
      },
    );
    expect(ran.code, ran.stderr).toBe(4);
    expect(ran.stdout).toBe('');
    expect(ran.stderr).toBe(
      `kernelwarden: --memory, --no-network need the embedded gateway: a remote gateway (${gateway.baseUrl}) launches ` +
        'kernels whose limits nothing here can enforce, so none is started\n',
    );
  });
});

describe('kernelwarden doctor --json', () => {
  it('says for each limit flag whether it can be enforced here and by what', async () => {
    const ran = await cli(['doctor', '--json']);
    const { checks } = JSON.parse(ran.stdout) as {
      checks: { name: string; ok: boolean; detail: string; mechanisms?: string[] }[];
    };
    const limits = Object.fromEntries(checks.filter((c) => c.name.startsWith('limit ')).map((c) => [c.name, c]));
    expect(Object.keys(limits)).toEqual([
      'limit --memory',
      'limit --max-processes',
      'limit --cpu-time',
      'limit --no-network',
    ]);
    // This machine, as the tests above used it: cgroups for memory and processes, rlimits, a network namespace.
    expect(limits['limit --memory']).toMatchObject({
      ok: true,
      mechanisms: [expect.stringMatching(/^cgroup-v/), 'rlimit'],
    });
    expect(limits['limit --max-processes']).toMatchObject({
      ok: true,
      mechanisms: [expect.stringMatching(/^cgroup-v/)],
    });
    expect(limits['limit --cpu-time']).toMatchObject({ ok: true, mechanisms: ['rlimit'] });
    expect(limits['limit --no-network']).toMatchObject({ ok: true, mechanisms: ['network-namespace'] });
    expect(limits['limit --memory']?.detail).toMatch(/memory controller/);
  });
});
