import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TerminalTextFilter, terminalSafe, terminalSafeJson } from './terminal-text.js';

const TTY = { colors: true };
const PIPE = { colors: false };

/** Every control character a terminal could act on, after the allowed SGR sequences are taken out. */
function controlsLeft(text: string, colors: boolean): string[] {
  const withoutSgr = colors ? text.replace(/\x1b\[[0-9;:]*m/g, '') : text;
  return [...withoutSgr].filter((c) => {
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

describe('terminalSafe', () => {
  it('shows an OSC title, an OSC 52 clipboard write, a screen clear and a DCS string as text', () => {
    expect(terminalSafe('a\x1b]0;pwned\x07b', TTY)).toBe('a\\x1b]0;pwned\\x07b');
    expect(terminalSafe('\x1b]52;c;aGk=\x1b\\', TTY)).toBe('\\x1b]52;c;aGk=\\x1b\\');
    expect(terminalSafe('\x1b[2J\x1b[H', TTY)).toBe('\\x1b[2J\\x1b[H');
    expect(terminalSafe('\x1bP+q544e\x1b\\', PIPE)).toBe('\\x1bP+q544e\\x1b\\');
  });

  it('shows 8-bit C1 controls, BEL, backspace, DEL and NUL escaped', () => {
    expect(terminalSafe('\x9b2J\x9d0;t\x9c\x90x', TTY)).toBe('\\x9b2J\\x9d0;t\\x9c\\x90x');
    expect(terminalSafe('a\x07b\bc\x7fd\x00', PIPE)).toBe('a\\x07b\\x08c\\x7fd\\x00');
  });

  it('keeps newlines, tabs, carriage returns and printable Unicode', () => {
    expect(terminalSafe('10%\r50%\r100%\n\tdone ✓ ü 日本\n', TTY)).toBe('10%\r50%\r100%\n\tdone ✓ ü 日本\n');
  });

  it('keeps SGR colours on a terminal and removes them on a pipe', () => {
    const red = '\x1b[0;31mZeroDivisionError\x1b[0m: division by zero\x1b[38;5;208m!\x1b[m';
    expect(terminalSafe(red, TTY)).toBe(red);
    expect(terminalSafe(red, PIPE)).toBe('ZeroDivisionError: division by zero!');
  });

  it('does not take a CSI with a private marker or another final byte for a colour', () => {
    expect(terminalSafe('\x1b[?1049h\x1b[6n\x1b[>c', TTY)).toBe('\\x1b[?1049h\\x1b[6n\\x1b[>c');
  });

  it('shows a lone ESC or an unfinished sequence at the end as text', () => {
    expect(terminalSafe('x\x1b', TTY)).toBe('x\\x1b');
    expect(terminalSafe('x\x1b[31', TTY)).toBe('x\\x1b[31');
  });

  it('never lets through a control character other than \\n, \\t, \\r and (on a terminal) SGR', () => {
    fc.assert(
      fc.property(hostile, fc.boolean(), (text, colors) => {
        const out = terminalSafe(text, { colors });
        expect(controlsLeft(out, colors)).toEqual([]);
        if (!colors) expect(out).not.toContain('\x1b');
      }),
      { numRuns: 2000 },
    );
  });

  it('changes nothing in text without control characters', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme' }).filter((s) => !/[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/.test(s)),
        (text) => {
          expect(terminalSafe(text, TTY)).toBe(text);
        },
      ),
    );
  });
});

describe('TerminalTextFilter', () => {
  it('keeps a colour sequence split across chunks whole', () => {
    const filter = new TerminalTextFilter(TTY);
    expect(filter.write('a\x1b[3')).toBe('a');
    expect(filter.write('1mred\x1b')).toBe('\x1b[31mred');
    expect(filter.write('[0m')).toBe('\x1b[0m');
    expect(filter.flush()).toBe('');
  });

  it('gives the same as terminalSafe however the text is cut into chunks', () => {
    fc.assert(
      fc.property(hostile, fc.array(fc.nat(), { maxLength: 8 }), fc.boolean(), (text, cuts, colors) => {
        const points = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
        const filter = new TerminalTextFilter({ colors });
        let out = '';
        let from = 0;
        for (const at of points) {
          out += filter.write(text.slice(from, at));
          from = at;
        }
        out += filter.write(text.slice(from)) + filter.flush();
        expect(out).toBe(terminalSafe(text, { colors }));
        expect(controlsLeft(out, colors)).toEqual([]);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('terminalSafeJson', () => {
  it('writes DEL and C1 characters as \\u escapes and stays the same JSON', () => {
    const value = { text: 'a\x9b2J\x7f\x1b]0;t\x07' };
    const json = terminalSafeJson(value);
    expect(json).not.toMatch(/[\x00-\x1f\x7f-\x9f]/);
    expect(JSON.parse(json)).toEqual(value);
  });
});
