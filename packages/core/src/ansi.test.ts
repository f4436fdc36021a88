import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { stripAnsi } from './ansi.js';

/** Every control character a terminal could act on. */
function controlsLeft(text: string): string[] {
  return [...text].filter((c) => {
    const code = c.charCodeAt(0);
    return code !== 0x09 && code !== 0x0a && code !== 0x0d && (code < 0x20 || (code >= 0x7f && code <= 0x9f));
  });
}

/** Text full of the things hostile output uses. */
const hostile = fc
  .array(
    fc.oneof(
      fc.string(),
      fc.constantFrom(
        '\x1b]0;pwned\x07',
        '\x1b]52;c;cm0gLXJmIH4=\x07',
        '\x1b[2J',
        '\x1b[H',
        '\x1b[31m',
        '\x1b[0m',
        '\x1b[1;32m',
        '\x1bP+q544e\x1b\\',
        '\x1b_apc\x1b\\',
        '\x1b^pm\x1b\\',
        '\x1bXsos\x1b\\',
        '\x1bc',
        '\x1b7',
        '\x9b2J',
        '\x9d0;t\x9c',
        '\x90dcs\x9c',
        '\x1b',
        '\x1b[',
        '\x07',
        '\b',
        '\r',
        '\n',
        '\t',
        '\x7f',
        '\x00',
      ),
      fc.integer({ min: 0, max: 0x10ffff }).map((n) => String.fromCodePoint(n)),
    ),
    { maxLength: 40 },
  )
  .map((parts) => parts.join(''));

describe('stripAnsi', () => {
  it('removes colours and hyperlinks', () => {
    expect(stripAnsi('\x1b[1;31mred\x1b[0m \x1b]8;;file:///x\x07link\x1b]8;;\x07')).toBe('red link');
  });

  it('removes CSI, OSC, DCS, APC, 8-bit C1 sequences and stray controls, keeping the text', () => {
    expect(
      stripAnsi('\x1b[31mred\x1b[0m \x1b]0;t\x07ok \x1bP+q\x1b\\dcs \x1b_apc\x1b\\ \x9b2Jx\x9d0;y\x9c\x07!\n'),
    ).toBe('red ok dcs  x!\n');
  });

  it('never leaves a control character other than \\n, \\t and \\r', () => {
    fc.assert(
      fc.property(hostile, (text) => {
        expect(controlsLeft(stripAnsi(text))).toEqual([]);
      }),
      { numRuns: 2000 },
    );
  });
});
