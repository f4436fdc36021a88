import { InvalidOptionsError } from '@kernelwarden/core';
import { RecordingKernel } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { plainExecutor } from './executor.js';
import { createLanguageSlot } from './lazy-language-slot.js';
import { resolveSessionOptions } from './session-options.js';

const python = () => new RecordingKernel('p');

function issuePaths(options: unknown): string[] {
  try {
    resolveSessionOptions(options as never);
  } catch (error) {
    if (InvalidOptionsError.isInstance(error)) return error.issues.map((issue) => issue.path);
    throw error;
  }
  return [];
}

describe('resolveSessionOptions', () => {
  it('folds r into the by-name slots', () => {
    const r = createLanguageSlot({ language: 'r', spawn: () => new RecordingKernel('r') });
    const julia = createLanguageSlot({ language: 'julia', spawn: () => new RecordingKernel('j') });
    const resolved = resolveSessionOptions({
      python,
      r,
      slots: { julia },
      slotEnvs: { r: 'r-base', julia: '1.11' },
    });
    expect([...resolved.slots]).toEqual([
      ['r', r],
      ['julia', julia],
    ]);
    expect([...resolved.slotEnvs]).toEqual([
      ['r', 'r-base'],
      ['julia', '1.11'],
    ]);
    expect(resolved.executor).toBe(plainExecutor);
  });

  it('keeps the caller’s own objects, not copies', () => {
    const readIsolation = { roots: ['/a'], allowedRoots: [], extra: true };
    const executor = { run: plainExecutor.run };
    const resolved = resolveSessionOptions({ python, readIsolation, executor });
    expect(resolved.readIsolation).toBe(readIsolation);
    expect(resolved.executor).toBe(executor);
  });

  it('names every bad field with its path', () => {
    expect(issuePaths(null)).toEqual(['options']);
    expect(issuePaths({})).toEqual(['options.python']);
    expect(
      issuePaths({
        python,
        env: '',
        spares: { size: -1 },
        maxBackground: 0,
        maxPeekChars: 1.5,
        idleTtlMs: 'soon',
        executor: {},
        readIsolation: { roots: '/a' },
      }),
    ).toEqual([
      'options.env',
      'options.readIsolation.roots',
      'options.readIsolation.allowedRoots',
      'options.executor.run',
      'options.spares.size',
      'options.idleTtlMs',
      'options.maxBackground',
      'options.maxPeekChars',
    ]);
  });
});
