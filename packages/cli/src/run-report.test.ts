import type { Output } from '@kernelwarden/core';
import { describe, expect, it } from 'vitest';
import { boundReport, formatRunReport, jsonChars, type RunReport } from './run-report.js';

function report(over: Partial<RunReport> = {}): RunReport {
  return {
    exitCode: 0,
    status: 'ok',
    language: 'python',
    cellId: 'c1',
    stdout: '',
    stderr: '',
    outputs: [],
    files: [],
    imagesNotSaved: 0,
    timedOut: false,
    cancelled: false,
    kernelReset: false,
    truncated: false,
    outputDropped: false,
    elided: false,
    notes: [],
    durationMs: 1,
    ...over,
  };
}

const image = (chars: number): Output => ({
  type: 'display_data',
  data: { 'image/png': 'A'.repeat(chars), 'text/plain': '<Figure>' },
  metadata: {},
});

describe('jsonChars', () => {
  it('counts at least the JSON length, and stops once past the limit', () => {
    const value = { a: ['x', 1, null, { b: 'yy' }] };
    expect(jsonChars(value, 1000)).toBeGreaterThanOrEqual(JSON.stringify(value).length);
    expect(jsonChars(['a'.repeat(100), 'b'.repeat(100)], 50)).toBeLessThan(200);
  });
});

describe('boundReport', () => {
  it('keeps outputs in order while they fit, and replaces the rest with stubs and a note', () => {
    const bounded = boundReport(report({ outputs: [image(100), image(1000), image(100)] }), 400);
    expect(bounded.outputs[0]).toEqual(image(100));
    expect(bounded.outputs[1]).toMatchObject({
      type: 'display_data',
      mimeTypes: ['image/png', 'text/plain'],
      elided: { reason: "past the report's 400 bytes of output data" },
    });
    expect(bounded.outputs[2]).toEqual(image(100));
    expect(bounded.elided).toBe(true);
    expect(bounded.notes).toEqual([
      expect.stringMatching(/^1 output \(at least .*\) left out of this report, past its 400 bytes of output data/),
    ]);
  });

  it('shortens a traceback too large for the report', () => {
    const bounded = boundReport(
      report({ status: 'error', error: { ename: 'E', evalue: 'v'.repeat(100_000), traceback: ['t'.repeat(100_000)] } }),
      10_000,
    );
    const error = bounded.error as { evalue: string; traceback: string[] };
    expect(error.evalue.length).toBeLessThan(10_000);
    expect(error.evalue).toMatch(/characters elided\]$/);
    expect(bounded.notes).toContain('the traceback was shortened to fit the report');
  });
});

describe('formatRunReport', () => {
  it('writes a report without outputs, saying why, when serialising fails', () => {
    const hostile = {
      type: 'display_data',
      data: {
        toJSON() {
          throw new RangeError('Invalid string length');
        },
      },
      metadata: {},
    } as unknown as Output;
    const doc = JSON.parse(formatRunReport(report({ exitCode: 1, status: 'error', outputs: [hostile] })));
    expect(doc).toMatchObject({ exitCode: 1, status: 'error', outputs: [], elided: true });
    expect(doc.notes).toEqual([expect.stringContaining('RangeError: Invalid string length')]);
  });
});
