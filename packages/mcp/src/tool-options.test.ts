import { InvalidOptionsError, systemClock } from '@kernelwarden/core';
import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_IMAGES, DEFAULT_MAX_TEXT_CHARS, resolveKernelToolOptions } from './tool-options.js';

describe('resolveKernelToolOptions', () => {
  it('applies the defaults', () => {
    expect(resolveKernelToolOptions()).toEqual({
      maxTextChars: DEFAULT_MAX_TEXT_CHARS,
      maxImages: DEFAULT_MAX_IMAGES,
      maxImageBytes: 1_048_576,
      defaultTimeoutMs: 0,
      progressIntervalMs: 250,
      heartbeatMs: 10_000,
      maxSourceBytes: 4 * 1024 * 1024,
      maxWaitMs: 45_000,
      clock: systemClock,
    });
  });

  it('names the path of a bad field', () => {
    let error: unknown;
    try {
      resolveKernelToolOptions({ maxTextChars: 10 });
    } catch (e) {
      error = e;
    }
    expect(InvalidOptionsError.isInstance(error)).toBe(true);
    expect((error as InvalidOptionsError).path).toBe('options.maxTextChars');
  });

  it('rejects unknown fields', () => {
    expect(() => resolveKernelToolOptions({ maxChars: 5 } as never)).toThrow(/options/);
  });
});
