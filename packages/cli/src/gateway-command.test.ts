import { appendFileSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { logTail, redactTokens } from './gateway-command.js';
import { kernelRuntime, launcherLines } from './gateway-status-text.js';

describe('redactTokens', () => {
  it('hides tokens in server URLs and authorization headers', () => {
    expect(redactTokens('[I ServerApp] http://127.0.0.1:8888/?token=abc123def and more')).toBe(
      '[I ServerApp] http://127.0.0.1:8888/?token=<redacted> and more',
    );
    expect(redactTokens('GET /api/kernels?x=1&token=s3cr3t HTTP/1.1')).toBe(
      'GET /api/kernels?x=1&token=<redacted> HTTP/1.1',
    );
    expect(redactTokens('      "Authorization": "token s3cr3t",')).toBe('      "Authorization": "token <redacted>",');
    expect(redactTokens('Authorization: Bearer s3cr3t')).toBe('Authorization: Bearer <redacted>');
    expect(redactTokens('Kernel started: 1234')).toBe('Kernel started: 1234');
  });
});

describe('logTail', () => {
  it('reads only the end of a log a kernel made huge (3 GiB, sparse) and shows its last lines', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kw-log-tail-'));
    try {
      const file = join(dir, 'kernel.log');
      writeFileSync(file, 'first line\n');
      truncateSync(file, 3 * 1024 ** 3);
      appendFileSync(file, '\nsecond to last http://127.0.0.1:8888/?token=s3cr3t\nlast\n');
      expect(logTail(file, 2)).toEqual(['second to last http://127.0.0.1:8888/?token=<redacted>', 'last']);
      expect(logTail(file, 50)).toEqual(['second to last http://127.0.0.1:8888/?token=<redacted>', 'last']);
      expect(logTail(join(dir, 'missing.log'), 2)).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('shows a short log whole, its first line included', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kw-log-tail-'));
    try {
      const file = join(dir, 'server.log');
      writeFileSync(file, 'one\ntwo\nthree\n');
      expect(logTail(file, 50)).toEqual(['one', 'two', 'three']);
      expect(logTail(file, 1)).toEqual(['three']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('gateway status lines', () => {
  it("show each launcher's interpreter, pid, RSS and ipykernel, and each kernel's interpreter, ipykernel and launch", () => {
    expect(
      launcherLines({
        mode: 'fork',
        launchers: [
          {
            interpreter: '/usr/bin/python3',
            pid: 42,
            state: 'ready',
            rssBytes: 60 * 1024 * 1024,
            ipykernel: '6.17.0',
            preload: ['numpy'],
          },
          { interpreter: '/p/.venv/bin/python', pid: 43, state: 'dead', preload: [], reason: 'it exited' },
        ],
      }),
    ).toEqual([
      'launchers: ',
      '  /usr/bin/python3 ready (pid 42, 60.0 MiB RSS), ipykernel 6.17.0, preloads numpy',
      '  /p/.venv/bin/python dead (pid 43) — it exited',
      "  (kernels of isolated kernelspecs are always exec'd)",
    ]);
    expect(launcherLines({ mode: 'exec', launchers: [] })).toEqual([
      "launchers: none (launcher exec: every kernel is exec'd; KERNELWARDEN_LAUNCHER=fork forks them)",
    ]);
    expect(launcherLines(undefined)).toEqual([]);
    const kernel = { id: 'k', name: 'python3' };
    expect(kernelRuntime({ ...kernel, interpreter: '/usr/bin/python3', ipykernel: '6.17.0', launch: 'fork' })).toBe(
      ' — python /usr/bin/python3, ipykernel 6.17.0, forked',
    );
    expect(kernelRuntime({ ...kernel, interpreter: '/usr/bin/python3', launch: 'exec' })).toBe(
      " — python /usr/bin/python3, ipykernel unknown, exec'd",
    );
    expect(kernelRuntime({ ...kernel, name: 'ir', launch: 'exec' })).toBe('');
  });
});
