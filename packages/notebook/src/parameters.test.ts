import { describe, expect, it } from 'vitest';
import {
  injectParameters,
  loadNotebook,
  NotebookParameterError,
  type ParameterValue,
  PyFloat,
  parameterLanguage,
  parameterSource,
  parseParameterValue,
  pyFloatRepr,
  translateValue,
} from './index.js';
import { pythonWith, runPython } from './python.test-fixture.js';

const python = pythonWith(['nbformat']);

describe('parameters are written as papermill writes them', () => {
  it('Python: every value reads back as itself, and strings are escaped as unicode_escape escapes them', () => {
    const strings = ['plain', 'wörld "q" \\ \n\t\r\x01\x7f é 中 😀', "it's", ''];
    const source = parameterSource(
      {
        a: 1,
        b: 0.1,
        c: new PyFloat(2),
        d: 1e16,
        e: Number.NaN,
        f: Number.NEGATIVE_INFINITY,
        g: true,
        h: null,
        i: [1, 'x', [false]],
        j: { k: 'v', 'key "q"': 2.5 },
        big: 123456789012345678901234567890n,
        s0: strings[0]!,
        s1: strings[1]!,
        s2: strings[2]!,
        s3: strings[3]!,
      },
      'python',
    );
    expect(source.split('\n')[0]).toBe('# Parameters');
    const check = runPython(
      python,
      `
import json, math, sys
ns = {}
exec(sys.stdin.read(), ns)
def papermill_str(s):
    return '"%s"' % s.encode('unicode_escape').decode('utf-8').replace('"', r'\\"')
print(json.dumps({
  "values": [ns["a"], ns["b"], ns["c"], type(ns["c"]).__name__, ns["d"], math.isnan(ns["e"]), ns["f"] == -math.inf, ns["g"], ns["h"], ns["i"], ns["j"], str(ns["big"])],
  "strings": [ns["s%d" % i] for i in range(4)],
  "escaped": [papermill_str(ns["s%d" % i]) for i in range(4)],
}))
`,
      source,
    );
    const got = JSON.parse(check) as { values: unknown[]; strings: string[]; escaped: string[] };
    expect(got.values).toEqual([
      1,
      0.1,
      2,
      'float',
      1e16,
      true,
      true,
      true,
      null,
      [1, 'x', [false]],
      { k: 'v', 'key "q"': 2.5 },
      '123456789012345678901234567890',
    ]);
    expect(got.strings).toEqual(strings);
    expect(got.escaped).toEqual(strings.map((s) => translateValue(s, 'python')));
  });

  it('R: NULL, TRUE/FALSE, list(), names without leading underscores, latin-1 letters as \\u escapes', () => {
    expect(parameterSource({ _x: null, y: [true, 1.5], z: { k: 'café' } }, 'R')).toBe(
      '# Parameters\nx = NULL\ny = list(TRUE, 1.5)\nz = list("k" = "caf\\u00e9")\n',
    );
  });

  it('refuses a name that is not a variable name, naming it', () => {
    let error: unknown;
    try {
      parameterSource({ 'not a name': 1 }, 'python');
    } catch (e) {
      error = e;
    }
    expect(NotebookParameterError.isInstance(error)).toBe(true);
    expect((error as NotebookParameterError).parameter).toBe('not a name');
    expect((error as NotebookParameterError).code).toBe('NOTEBOOK_PARAMETERS');
  });

  it('injects after the cell tagged parameters, replaces an earlier injected cell, else goes first; upgrades to 4.5', () => {
    const cell = (source: string, tags: string[] = []) => ({
      cell_type: 'code',
      metadata: { tags },
      source,
      execution_count: null,
      outputs: [],
    });
    const nb = loadNotebook({
      nbformat: 4,
      nbformat_minor: 4,
      metadata: { kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' } },
      cells: [cell('a'), cell('b = 1', ['parameters']), cell('c')],
    });
    expect(parameterLanguage(nb)).toBe('python');
    expect(injectParameters(nb, { b: 2 }, 'python')).toBe(2);
    expect(nb.nbformat_minor).toBe(5);
    expect(nb.metadata.orig_nbformat_minor).toBe(4);
    expect(nb.cells.every((c) => /^[0-9a-f]{8}$/.test(c.id ?? ''))).toBe(true);
    expect(nb.cells.map((c) => c.source)).toEqual(['a', 'b = 1', '# Parameters\nb = 2\n', 'c']);
    expect(injectParameters(nb, { b: 3 }, 'python')).toBe(2);
    expect(nb.cells.map((c) => c.source)).toEqual(['a', 'b = 1', '# Parameters\nb = 3\n', 'c']);
    const plain = loadNotebook({ nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [{ ...cell('x'), id: 'x' }] });
    expect(injectParameters(plain, [['q', 'v']], 'R')).toBe(0);
    expect(plain.cells[0]!.source).toBe('# Parameters\nq = "v"\n');
  });
});

describe('parseParameterValue reads -p values as papermill does', () => {
  it('True/False/None, integers, floats (1.0 stays a float), else text — as Python resolves them', () => {
    const inputs = [
      'True',
      'False',
      'None',
      'true',
      '42',
      '-7',
      ' 12 ',
      '1_000',
      '123456789012345678901234',
      '1.0',
      '0.5',
      '1e3',
      '-0.0',
      '.5',
      '5.',
      'inf',
      '-Infinity',
      'nan',
      'abc',
      '1.2.3',
      '',
      '0x10',
    ];
    const resolved = JSON.parse(
      runPython(
        python,
        `
import json, math, sys
def resolve(value):
    if value == "True": return True
    if value == "False": return False
    if value == "None": return None
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value
def show(v):
    if isinstance(v, bool) or v is None or isinstance(v, str): return v
    if isinstance(v, int): return {"int": str(v)}
    return {"float": repr(v)}
print(json.dumps([show(resolve(v)) for v in json.load(sys.stdin)]))
`,
        JSON.stringify(inputs),
      ),
    );
    const show = (v: ParameterValue) => {
      if (typeof v === 'bigint') return { int: v.toString() };
      if (typeof v === 'number' && Number.isInteger(v)) return { int: String(v) };
      if (typeof v === 'number' || v instanceof PyFloat) {
        const n = typeof v === 'number' ? v : v.value;
        return { float: Number.isNaN(n) ? 'nan' : n === Infinity ? 'inf' : n === -Infinity ? '-inf' : pyFloatRepr(n) };
      }
      return v;
    };
    expect(inputs.map((i) => show(parseParameterValue(i)))).toEqual(resolved);
  });
});
