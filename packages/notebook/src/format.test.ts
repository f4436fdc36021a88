import { InvalidOptionsError } from '@kernelwarden/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  NotebookFormatError,
  PyFloat,
  parseNotebook,
  parsePyJson,
  serializeNotebook,
  splitLinesKeepEnds,
  stringifyPyJson,
} from './index.js';
import { nbformatRoundTrip, pythonWith, runPython } from './python.test-fixture.js';

const python = pythonWith(['nbformat']);

const TRICKY = 'a\r\nb\rc\vd\fe\x1cf\x1dg\x1eh\x85i\u2028j\u2029k\nl';

/** Notebooks whose every field exercises a rule of nbformat's reader or writer. */
const CORPUS: Record<string, unknown> = {
  minimal: { nbformat: 4, nbformat_minor: 5, metadata: {}, cells: [] },
  'sources, outputs and line breaks': {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: { name: 'python3', display_name: 'Python 3 (ipykernel)', language: 'python' },
      language_info: { name: 'python', version: '3.11.7', codemirror_mode: { name: 'ipython', version: 3 } },
      orig_nbformat: 3,
      signature: 'sha256:abc',
      empty: {},
      list: [],
    },
    cells: [
      {
        cell_type: 'code',
        id: 'c1',
        metadata: { trusted: true, tags: ['parameters'], collapsed: false },
        source: ['x = 1\n', 'print(x)'],
        execution_count: 3,
        outputs: [
          { output_type: 'stream', name: 'stdout', text: ['1\n', '2\n'] },
          { output_type: 'stream', name: 'stderr', text: TRICKY },
          {
            output_type: 'execute_result',
            execution_count: 3,
            metadata: { 'image/png': { width: 10, height: 2.5 } },
            data: {
              'text/plain': 'line 1\nline 2\n',
              'text/html': ['<b>', 'x</b>\n'],
              'image/png': ['iVBORw0KGgo=\n', 'AAAA\n'],
              'image/svg+xml': '<svg>\n</svg>\n',
              'application/javascript': 'var a = 1;\nvar b = 2;',
              'application/json': { a: [1, 2.5, -3], b: 'x\ny' },
              'application/vnd.custom+json': ['kept', 'as a list'],
              'application/pdf': 'JVBERi0=\nAA==\n',
            },
          },
          { output_type: 'display_data', data: { 'text/markdown': '# T\n\nbody' }, metadata: {} },
          {
            output_type: 'error',
            ename: 'ValueError',
            evalue: 'bad\nvalue',
            traceback: ['\u001b[0;31mline\u001b[0m', 'two\nlines'],
          },
        ],
      },
      {
        cell_type: 'markdown',
        id: 'm-1_x',
        metadata: {},
        source: 'Unicode: café 中文 😀 \u0000\u0007 "quotes" \\ back\\slash \u007f\u00ad\ufeff',
        attachments: { 'a.png': { 'image/png': 'iVBORw0KGgo=', 'text/plain': 'a\nb' } },
      },
      { cell_type: 'raw', id: 'r', metadata: { format: 'text/x-rst' }, source: '' },
    ],
  },
  'numbers as Python reads and writes them': `{"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {
    "floats": [1.0, -0.0, 0.1, 1e16, 1.5e16, 1E15, 1e-4, 1e-5, 123456789.125, 1.7976931348623157e308, 5e-324, 2.5e-7, 3.0e2],
    "ints": [0, -0, 12345678901234567890123, -9007199254740993, 42]}}`,
  'keys sorted by code point': {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { '😀': 1, '\uff01': 2, a: 3, B: 4, '': 5, é: 6, 'a b': 7, __proto__x: 8 },
    cells: [],
  },
  'an nbformat 4.4 notebook without ids': {
    nbformat: 4,
    nbformat_minor: 4,
    metadata: {},
    cells: [{ cell_type: 'code', metadata: {}, source: 'print(1)', execution_count: null, outputs: [] }],
  },
};

/** The notebook as JSON text (the numbers notebook is text already, to keep Python's number lexemes). */
function pythonText(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value, null, 1);
}

describe('serializeNotebook writes what nbformat writes', () => {
  const names = Object.keys(CORPUS);
  const texts = names.map((name) => pythonText(CORPUS[name]));
  const expected = nbformatRoundTrip(python, texts);

  names.forEach((name, i) => {
    it(`byte for byte: ${name}`, () => {
      const ours = serializeNotebook(parseNotebook(texts[i]!));
      expect(ours).toBe(expected[i]);
    });
  });

  it('keeps floats that are whole numbers as floats, and huge integers exact', () => {
    const nb = parseNotebook(texts[names.indexOf('numbers as Python reads and writes them')]!);
    const text = serializeNotebook(nb);
    expect(text).toContain('  1.0,\n');
    expect(text).toContain('  -0.0,\n');
    expect(text).toContain('  1e+16,\n');
    expect(text).toContain('  12345678901234567890123,\n');
  });

  it('matches nbformat on random metadata: strings of any code points, floats, integers, nesting', () => {
    const scalar = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 12 }),
      fc.double({ noNaN: false }),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
    );
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        scalar,
        fc.array(tie('node'), { maxLength: 4 }),
        fc.dictionary(fc.string({ unit: 'binary', maxLength: 6 }), tie('node'), { maxKeys: 4 }),
      ),
    })).node;
    const samples = fc.sample(
      fc.record({
        meta: fc.dictionary(fc.string({ unit: 'binary', maxLength: 6 }), value, { maxKeys: 6 }),
        source: fc.string({ unit: 'binary', maxLength: 40 }),
      }),
      { numRuns: 150, seed: 20261202 },
    );
    const texts = samples.map(({ meta, source }) =>
      stringifyPyJson({
        nbformat: 4,
        nbformat_minor: 5,
        metadata: { meta },
        cells: [{ cell_type: 'markdown', id: 'x', metadata: {}, source }],
      }),
    );
    const theirs = nbformatRoundTrip(python, texts);
    texts.forEach((text, i) => {
      expect(serializeNotebook(parseNotebook(text))).toBe(theirs[i]);
    });
  });

  it('gives cells without an id (from nbformat 4.5) a fresh 8-hex-digit id, and a repeated id a new one, as nbformat does', () => {
    const text = JSON.stringify({
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {},
      cells: [
        { cell_type: 'markdown', metadata: {}, source: 'a' },
        { cell_type: 'markdown', id: 'same', metadata: {}, source: 'b' },
        { cell_type: 'markdown', id: 'same', metadata: {}, source: 'c' },
      ],
    });
    const [theirs] = nbformatRoundTrip(python, [text]);
    const ours = serializeNotebook(parseNotebook(text));
    const ids = (t: string) => (JSON.parse(t) as { cells: { id: string }[] }).cells.map((c) => c.id);
    for (const list of [ids(theirs!), ids(ours)]) {
      expect(list[0]).toMatch(/^[0-9a-f]{8}$/);
      expect(list[1]).toBe('same');
      expect(list[2]).toMatch(/^[0-9a-f]{8}$/);
    }
    const masked = (t: string) => t.replace(/"id": "[0-9a-f]{8}"/g, '"id": "?"');
    expect(masked(ours)).toBe(masked(theirs!));
  });
});

describe('splitLinesKeepEnds is str.splitlines(True)', () => {
  it('splits on every line break Python knows', () => {
    const samples = [TRICKY, '', '\n', 'a', 'a\n', '\r\n\r\n', '\n\r', 'x\u2028', 'é\x85ü'];
    const theirs = JSON.parse(
      runPython(
        python,
        'import json,sys; print(json.dumps([s.splitlines(True) for s in json.load(sys.stdin)]))',
        JSON.stringify(samples),
      ),
    );
    expect(samples.map(splitLinesKeepEnds)).toEqual(theirs);
  });
});

describe('parsePyJson and stringifyPyJson', () => {
  it('reads NaN and Infinity as Python does and writes them back', () => {
    const value = parsePyJson('[NaN, Infinity, -Infinity, 1e400, 2.0]') as unknown[];
    expect(stringifyPyJson(value, 1)).toBe('[\n NaN,\n Infinity,\n -Infinity,\n Infinity,\n 2.0\n]');
    expect(value[4]).toBeInstanceOf(PyFloat);
  });
});

describe('loadNotebook refuses what is not nbformat v4, naming the field', () => {
  const base = () => ({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {},
    cells: [{ cell_type: 'code', id: 'a', metadata: {}, source: '', execution_count: null, outputs: [] }] as unknown[],
  });
  const cases: [string, (nb: ReturnType<typeof base>) => unknown, string][] = [
    ['a v3 notebook', (nb) => ({ ...nb, nbformat: 3 }), 'nbformat'],
    [
      'a cell without source',
      (nb) => ({ ...nb, cells: [{ cell_type: 'code', id: 'a', metadata: {}, outputs: [], execution_count: null }] }),
      'cells.0.source',
    ],
    [
      'an unknown cell type',
      (nb) => ({ ...nb, cells: [{ cell_type: 'heading', metadata: {}, source: '' }] }),
      'cells.0.cell_type',
    ],
    [
      'an execution count that is not an integer',
      (nb) => ({ ...nb, cells: [{ ...(nb.cells[0] as object), execution_count: 'one' }] }),
      'cells.0.execution_count',
    ],
    ['a bad cell id', (nb) => ({ ...nb, cells: [{ ...(nb.cells[0] as object), id: 'has space' }] }), 'cells.0.id'],
    [
      'an output without output_type',
      (nb) => ({ ...nb, cells: [{ ...(nb.cells[0] as object), outputs: [{ name: 'stdout', text: '' }] }] }),
      'cells.0.outputs.0.output_type',
    ],
    [
      'tags that are not strings',
      (nb) => ({ ...nb, cells: [{ ...(nb.cells[0] as object), metadata: { tags: [1] } }] }),
      'cells.0.metadata.tags.0',
    ],
  ];
  for (const [what, change, path] of cases) {
    it(`${what}: NotebookFormatError at ${path}`, () => {
      const error = (() => {
        try {
          parseNotebook(JSON.stringify(change(base())));
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(NotebookFormatError.isInstance(error)).toBe(true);
      expect((error as NotebookFormatError).code).toBe('NOTEBOOK_INVALID');
      expect((error as NotebookFormatError).path).toBe(path);
      expect(InvalidOptionsError.isInstance(error)).toBe(false);
    });
  }

  it('text that is not JSON: NotebookFormatError with the position', () => {
    expect(() => parseNotebook('{"nbformat": 4,')).toThrow(/not JSON: .* at position \d+/);
  });
});
