import { describe, expect, it } from 'vitest';
import { InvalidOptionsError } from './errors.js';
import { type OptionsSchema, parseOptions } from './options.js';

/** A hand-made schema in zod's shape: core's tests need no validation library. */
const numberField: OptionsSchema<{ n?: number }> = {
  safeParse(value) {
    const v = value as Record<string, unknown>;
    if (v === null || typeof v !== 'object') {
      return { success: false, error: { issues: [{ path: [], message: 'expected an object' }] } };
    }
    const unknown = Object.keys(v).filter((key) => key !== 'n');
    if (unknown.length > 0) {
      return {
        success: false,
        error: { issues: [{ path: [], code: 'unrecognized_keys', keys: unknown, message: 'Unrecognized keys' }] },
      };
    }
    if (v.n !== undefined && typeof v.n !== 'number') {
      return { success: false, error: { issues: [{ path: ['n'], message: 'expected a number' }] } };
    }
    return { success: true, data: v as { n?: number } };
  },
};

describe('parseOptions', () => {
  it('returns the parsed value when the schema accepts it', () => {
    expect(parseOptions(numberField, { n: 1 }, { subject: 'test options' })).toEqual({ n: 1 });
  });

  it('throws InvalidOptionsError with each field path under the root, and the schema error as cause', () => {
    let caught: unknown;
    try {
      parseOptions(numberField, { n: 'x' }, { subject: 'test options', root: 'options' });
    } catch (error) {
      caught = error;
    }
    expect(InvalidOptionsError.isInstance(caught)).toBe(true);
    const error = caught as InvalidOptionsError;
    expect(error.path).toBe('options.n');
    expect(error.message).toBe('Invalid test options at "options.n": expected a number');
    expect(error.cause).toMatchObject({ issues: [{ path: ['n'] }] });
  });

  it('names each unknown field at its own path', () => {
    expect(() => parseOptions(numberField, { a: 1, b: 2 }, { subject: 'policy', root: 'policy' })).toThrow(
      expect.objectContaining({
        issues: [
          { path: 'policy.a', message: 'is not a known field' },
          { path: 'policy.b', message: 'is not a known field' },
        ],
      }),
    );
  });

  it('reports a value that is not an object at the root itself', () => {
    expect(() => parseOptions(numberField, 5, { subject: 'test options', root: 'options' })).toThrow(
      expect.objectContaining({ path: 'options' }),
    );
    expect(() => parseOptions(numberField, 5, { subject: 'test options' })).toThrow(
      expect.objectContaining({ path: '' }),
    );
  });
});
