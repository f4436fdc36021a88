import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { kernelDiagnostics } from './kernel-diagnostics.js';

const ID = '37a237fb-810d-475d-83e1-0d53012014cb';
const TRACEBACK = [
  'Traceback (most recent call last):',
  '  File "<string>", line 1, in <module>',
  "ModuleNotFoundError: No module named 'kw_missing'",
];

describe('kernelDiagnostics().stderrTail', () => {
  let dir: string;
  let kernelLogDir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kw-diagnostics-'));
    kernelLogDir = join(dir, 'kernel-logs');
    mkdirSync(kernelLogDir);
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const diagnostics = (token = 'kw-s3cret') =>
    kernelDiagnostics({ runtimeDir: join(dir, 'runtime'), kernelLogDir }, token);

  it("reads the kernel's own log: its last ten lines, blank lines dropped, the token masked", () => {
    const lines = [...Array.from({ length: 12 }, (_, i) => `line ${i}`), '', ...TRACEBACK, 'token kw-s3cret here'];
    writeFileSync(join(kernelLogDir, `${ID}.log`), `${lines.join('\n')}\n`);
    expect(diagnostics().stderrTail(ID)).toEqual([
      'line 6',
      'line 7',
      'line 8',
      'line 9',
      'line 10',
      'line 11',
      ...TRACEBACK,
      'token <token> here',
    ]);
  });

  it('answers nothing for a kernel without a log, and for an id that is not one', () => {
    expect(diagnostics().stderrTail(ID)).toEqual([]);
    writeFileSync(join(dir, 'secret.log'), 'x\n');
    expect(diagnostics().stderrTail('../secret')).toEqual([]);
  });
});
