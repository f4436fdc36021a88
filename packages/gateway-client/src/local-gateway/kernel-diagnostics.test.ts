import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { kernelDiagnostics } from './kernel-diagnostics.js';

const ID = '37a237fb-810d-475d-83e1-0d53012014cb';
const OTHER = '9b1c2d3e-0000-4000-8000-000000000001';
const TRACEBACK = [
  'Traceback (most recent call last):',
  '  File "<string>", line 1, in <module>',
  "ModuleNotFoundError: No module named 'kw_missing'",
];

describe('kernelDiagnostics().stderrTail', () => {
  let dir: string;
  let logFile: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kw-diagnostics-'));
    logFile = join(dir, 'server.log');
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const tail = (log: string[], token = 'tok') => {
    writeFileSync(logFile, `${log.join('\n')}\n`);
    return kernelDiagnostics({ runtimeDir: join(dir, 'runtime'), logFile }, token).stderrTail(ID);
  };

  it("finds a kernel's error written after the server logged its start (jupyter-server 1.x)", () => {
    const lines = tail([
      '[I 2026-12-01 22:52:02.390 ServerApp] Jupyter Server 1.23.3 is running at:',
      `[I 2026-12-01 22:52:02.601 ServerApp] Kernel started: ${ID}`,
      ...TRACEBACK,
      '[I 2026-12-01 22:52:03.602 ServerApp] KernelRestarter: restarting kernel (1/5), new random ports',
      ...TRACEBACK,
    ]);
    expect(lines).toEqual([...TRACEBACK, ...TRACEBACK]);
  });

  it("finds a kernel's error written before the server logged its start (jupyter-server 2.x)", () => {
    const lines = tail([
      '[I 2026-12-01 22:52:02.390 ServerApp] Jupyter Server 2.21.1 is running at:',
      '[W 2026-12-01 22:52:02.495 ServerApp] 403 GET /api/kernels (@127.0.0.1) 0.54ms referer=None',
      ...TRACEBACK,
      `[I 2026-12-01 22:52:02.601 ServerApp] Kernel started: ${ID}`,
      `[I 2026-12-01 22:52:03.625 ServerApp] Kernel shutdown: ${ID}`,
    ]);
    expect(lines).toEqual(TRACEBACK);
  });

  it("keeps to the lines around the kernel's own start record, the last ten, with the token masked", () => {
    const lines = tail(
      [
        `[I 2026-12-01 22:52:01.000 ServerApp] Kernel started: ${OTHER}`,
        'an earlier kernel said this',
        '[I 2026-12-01 22:52:01.500 ServerApp] 201 POST /api/kernels',
        `[I 2026-12-01 22:52:02.601 ServerApp] Kernel started: ${ID}`,
        ...Array.from({ length: 12 }, (_, i) => `line ${i} secret-token`),
      ],
      'secret-token',
    );
    expect(lines).toEqual(Array.from({ length: 10 }, (_, i) => `line ${i + 2} <token>`));
  });

  it('returns nothing for a kernel the log never mentions, or an id that is not one', () => {
    expect(tail(['[I 2026-12-01 22:52:02.390 ServerApp] Jupyter Server 2.21.1 is running at:', ...TRACEBACK])).toEqual(
      [],
    );
    writeFileSync(logFile, TRACEBACK.join('\n'));
    expect(kernelDiagnostics({ runtimeDir: dir, logFile }, 'tok').stderrTail('../x')).toEqual([]);
  });
});
