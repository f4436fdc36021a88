import { describe, expect, it } from 'vitest';
import { InvalidOptionsError } from './errors.js';
import { type OptionsSchema, parseOptions } from './options.js';

/** A schema accepting `{ n: number >= 0 }`, shaped like zod's `safeParse`. */
const schema: OptionsSchema<{ n: number }> = {
  safeParse(value) {
    const n = (value as { n?: unknown } | undefined)?.n;
    if (typeof n === 'number' && n >= 0) return { success: true, data: { n } };
    return { success: false, error: { issues: [{ path: ['outer', 0, 'n'], message: 'must be >= 0' }] } };
  },
};

describe('parseOptions', () => {
  it('returns the parsed value of valid options', () => {
    expect(parseOptions(schema, { n: 3 }, 'test options')).toEqual({ n: 3 });
  });

  it('throws InvalidOptionsError naming the dotted path of the bad field, with the schema error as cause', () => {
    let error: unknown;
    try {
      parseOptions(schema, { n: -1 }, 'test options');
    } catch (e) {
      error = e;
    }
    expect(InvalidOptionsError.isInstance(error)).toBe(true);
    const invalid = error as InvalidOptionsError;
    expect(invalid.path).toBe('outer.0.n');
    expect(invalid.message).toBe('Invalid test options at "outer.0.n": must be >= 0');
    expect(invalid.cause).toEqual({ issues: [{ path: ['outer', 0, 'n'], message: 'must be >= 0' }] });
  });
});
