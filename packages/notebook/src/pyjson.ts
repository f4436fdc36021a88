/**
 * JSON as Python's `json` module reads and writes it, so that a notebook read here and written back is byte for byte
 * what nbformat writes: floats stay floats (`1.0` is not `1`), integers of any size stay exact, `NaN`/`Infinity` are
 * read and written, keys are sorted by code point, and numbers are printed as Python's `repr` prints them.
 */

/**
 * A float whose value is a whole number (`1.0`, `-0.0`, `1e16`): JavaScript would otherwise write it back as an
 * integer. Other floats are plain numbers (a number that is not a whole number can only be a float).
 */
export class PyFloat {
  constructor(readonly value: number) {}
  valueOf(): number {
    return this.value;
  }
  toJSON(): number {
    return this.value;
  }
}

/** Where and why a text is not JSON. */
export class PyJsonSyntaxError extends SyntaxError {
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(message);
    this.name = 'SyntaxError';
  }
}

/** The single-character escapes of a JSON string (`\uXXXX` is read apart). */
const UNESCAPES: ReadonlyMap<string | undefined, string> = new Map([
  ['"', '"'],
  ['\\', '\\'],
  ['/', '/'],
  ['b', '\b'],
  ['f', '\f'],
  ['n', '\n'],
  ['r', '\r'],
  ['t', '\t'],
]);

/** The literals JSON (with Python's extensions) has, and their values. */
const LITERALS: ReadonlyArray<readonly [string, unknown]> = [
  ['null', null],
  ['true', true],
  ['false', false],
  ['NaN', Number.NaN],
  ['Infinity', Number.POSITIVE_INFINITY],
  ['-Infinity', Number.NEGATIVE_INFINITY],
];

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?/y;

/** A recursive-descent reader of one JSON text, with Python's error messages and number types. */
class PyJsonReader {
  #at = 0;

  constructor(readonly text: string) {}

  /** The whole text's value: nothing but whitespace may follow it. */
  document(): unknown {
    const result = this.#value();
    this.#ws();
    if (this.#at !== this.text.length) this.#fail('Extra data');
    return result;
  }

  #fail(what: string): never {
    throw new PyJsonSyntaxError(`${what} at position ${this.#at}`, this.#at);
  }

  #ws(): void {
    for (;;) {
      const c = this.text.charCodeAt(this.#at);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) this.#at++;
      else return;
    }
  }

  /** Consumes `c` when it is next. */
  #eat(c: string): boolean {
    if (this.text[this.#at] !== c) return false;
    this.#at++;
    return true;
  }

  #value(): unknown {
    this.#ws();
    const c = this.text[this.#at];
    if (c === '{') return this.#object();
    if (c === '[') return this.#array();
    if (c === '"') return this.#string();
    for (const [word, value] of LITERALS) {
      if (this.text.startsWith(word, this.#at)) {
        this.#at += word.length;
        return value;
      }
    }
    return this.#number();
  }

  #object(): Record<string, unknown> {
    this.#at++;
    const out: Record<string, unknown> = {};
    this.#ws();
    if (this.#eat('}')) return out;
    for (;;) {
      this.#ws();
      if (this.text[this.#at] !== '"') this.#fail('Expecting property name enclosed in double quotes');
      const key = this.#string();
      this.#ws();
      if (!this.#eat(':')) this.#fail("Expecting ':' delimiter");
      const v = this.#value();
      Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
      this.#ws();
      if (this.#eat(',')) continue;
      if (this.#eat('}')) return out;
      this.#fail("Expecting ',' delimiter");
    }
  }

  #array(): unknown[] {
    this.#at++;
    const out: unknown[] = [];
    this.#ws();
    if (this.#eat(']')) return out;
    for (;;) {
      out.push(this.#value());
      this.#ws();
      if (this.#eat(',')) continue;
      if (this.#eat(']')) return out;
      this.#fail("Expecting ',' delimiter");
    }
  }

  #number(): unknown {
    NUMBER.lastIndex = this.#at;
    const m = NUMBER.exec(this.text);
    if (!m) return this.#fail('Expecting value');
    this.#at = NUMBER.lastIndex;
    const lexeme = m[0];
    if (m[1] === undefined && m[2] === undefined) {
      const n = Number(lexeme);
      if (Number.isSafeInteger(n)) return n === 0 ? 0 : n;
      return BigInt(lexeme);
    }
    const n = Number(lexeme);
    return Number.isInteger(n) || Object.is(n, -0) ? new PyFloat(n) : n;
  }

  #string(): string {
    const text = this.text;
    this.#at++; // opening quote
    let out = '';
    let start = this.#at;
    for (;;) {
      if (this.#at >= text.length) this.#fail('Unterminated string starting');
      const c = text.charCodeAt(this.#at);
      if (c === 0x22) {
        out += text.slice(start, this.#at);
        this.#at++;
        return out;
      }
      if (c < 0x20) this.#fail('Invalid control character');
      if (c === 0x5c) {
        out += text.slice(start, this.#at) + this.#escape();
        start = this.#at;
        continue;
      }
      this.#at++;
    }
  }

  /** The character of the escape sequence at the reader's position (a backslash), consumed. */
  #escape(): string {
    const e = this.text[this.#at + 1];
    this.#at += 2;
    if (e === 'u') {
      const hex = this.text.slice(this.#at, this.#at + 4);
      if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.#fail('Invalid \\uXXXX escape');
      this.#at += 4;
      return String.fromCharCode(Number.parseInt(hex, 16));
    }
    const char = UNESCAPES.get(e);
    if (char === undefined) {
      this.#at -= 2;
      this.#fail('Invalid \\escape');
    }
    return char;
  }
}

/**
 * Parses JSON as Python's `json.loads` does: `NaN`, `Infinity` and `-Infinity` are accepted; an integer that does not
 * fit a double exactly becomes a `bigint`; a float with a whole-number value becomes a `PyFloat`.
 */
export function parsePyJson(text: string): unknown {
  return new PyJsonReader(text).document();
}

/** Python's `repr(float)`: the shortest digits that round-trip, in Python's layout (`1e+16`, `1e-05`, `1.0`). */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (x === Number.POSITIVE_INFINITY) return 'Infinity';
  if (x === Number.NEGATIVE_INFINITY) return '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  const [mantissa = '', exp = '0'] = Math.abs(x).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  const decpt = Number(exp) + 1; // the decimal point sits after `decpt` digits
  if (decpt <= -4 || decpt > 16) {
    const e = decpt - 1;
    const frac = digits.length > 1 ? `.${digits.slice(1)}` : '';
    return `${sign}${digits[0]}${frac}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  }
  if (decpt <= 0) return `${sign}0.${'0'.repeat(-decpt)}${digits}`;
  if (decpt >= digits.length) return `${sign}${digits}${'0'.repeat(decpt - digits.length)}.0`;
  return `${sign}${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
}

/** Python's `repr(int)` of a JSON integer (a safe integer, any integral number, or a bigint). */
function pyIntRepr(x: number | bigint): string {
  if (typeof x === 'bigint') return x.toString();
  if (Number.isSafeInteger(x)) return String(x === 0 ? 0 : x);
  return BigInt(x).toString();
}

/** Orders strings by code point, as Python compares `str` (JavaScript's default compares UTF-16 units). */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    // A surrogate (part of a code point above U+FFFF) sorts after every other BMP unit.
    if (xs !== ys) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

const ESCAPES: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
};

/** A string as `json.dumps(..., ensure_ascii=False)` writes it. */
export function pyJsonString(s: string): string {
  return `"${s.replace(/["\\\u0000-\u001f]/g, (c) => ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}"`;
}

/**
 * `json.dumps(value, indent=indent, sort_keys=True, separators=(",", ": "), ensure_ascii=False)`. `undefined`
 * properties are left out, as `JSON.stringify` leaves them out.
 */
export function stringifyPyJson(value: unknown, indent = 1): string {
  const parts: string[] = [];
  const write = (v: unknown, depth: number): void => {
    if (v === null || v === undefined) {
      parts.push('null');
    } else if (typeof v === 'boolean') {
      parts.push(v ? 'true' : 'false');
    } else if (typeof v === 'string') {
      parts.push(pyJsonString(v));
    } else if (typeof v === 'number') {
      parts.push(Number.isInteger(v) ? pyIntRepr(v) : pyFloatRepr(v));
    } else if (typeof v === 'bigint') {
      parts.push(pyIntRepr(v));
    } else if (v instanceof PyFloat) {
      parts.push(pyFloatRepr(v.value));
    } else if (Array.isArray(v)) {
      if (v.length === 0) {
        parts.push('[]');
        return;
      }
      const inner = `\n${' '.repeat(indent * (depth + 1))}`;
      parts.push('[');
      v.forEach((item, i) => {
        parts.push(i === 0 ? inner : `,${inner}`);
        write(item, depth + 1);
      });
      parts.push(`\n${' '.repeat(indent * depth)}]`);
    } else if (typeof v === 'object') {
      const keys = Object.keys(v)
        .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
        .sort(compareCodePoints);
      if (keys.length === 0) {
        parts.push('{}');
        return;
      }
      const inner = `\n${' '.repeat(indent * (depth + 1))}`;
      parts.push('{');
      keys.forEach((k, i) => {
        parts.push(i === 0 ? inner : `,${inner}`);
        parts.push(pyJsonString(k), ': ');
        write((v as Record<string, unknown>)[k], depth + 1);
      });
      parts.push(`\n${' '.repeat(indent * depth)}}`);
    } else {
      throw new TypeError(`Object of type ${typeof v} is not JSON serializable`);
    }
  };
  write(value, 0);
  return parts.join('');
}

/** The line breaks of Python's `str.splitlines()`. */
const LINE_BREAK = /\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/g;

/** Python's `s.splitlines(True)`: the lines of `s`, each with its line break. */
export function splitLinesKeepEnds(s: string): string[] {
  const lines: string[] = [];
  let start = 0;
  for (const m of s.matchAll(LINE_BREAK)) {
    const end = (m.index ?? 0) + m[0].length;
    lines.push(s.slice(start, end));
    start = end;
  }
  if (start < s.length) lines.push(s.slice(start));
  return lines;
}

/** The characters Python's `str.isspace()` accepts (what `str.strip()` strips). */
const PY_SPACE = /^[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;

/** Python's `not s.strip()`: the text is empty or only whitespace. */
export function isBlank(s: string): boolean {
  return PY_SPACE.test(s);
}

/** A deep copy of a JSON value that keeps `PyFloat`s and bigints. */
export function cloneJson<T>(value: T): T {
  if (value === null || typeof value !== 'object' || value instanceof PyFloat) return value;
  if (Array.isArray(value)) return value.map(cloneJson) as T;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    Object.defineProperty(out, k, { value: cloneJson(v), enumerable: true, writable: true, configurable: true });
  }
  return out as T;
}
