import { describe, expect, it } from 'vitest';
import { emptyResult } from './result.js';

describe('emptyResult', () => {
  it('is an ok result with no output and every flag off', () => {
    const result = emptyResult('c1');
    expect(Object.keys(result)).toEqual([
      'status',
      'cellId',
      'stdout',
      'stderr',
      'outputs',
      'cancelled',
      'timedOut',
      'stdinRequested',
      'truncated',
    ]);
    expect(Object.values(result)).toEqual(['ok', 'c1', '', '', [], false, false, false, false]);
  });

  it('lays the given fields over the defaults and keeps the field order', () => {
    const result = emptyResult('c2', { status: 'aborted', cancelled: true, stdout: 'x' });
    expect(result).toMatchObject({ status: 'aborted', cellId: 'c2', cancelled: true, stdout: 'x', timedOut: false });
    expect(Object.keys(result).slice(0, 3)).toEqual(['status', 'cellId', 'stdout']);
  });

  it('gives every call its own outputs array', () => {
    const a = emptyResult('a');
    a.outputs.push({ type: 'stream', name: 'stdout', text: 'hi' });
    expect(emptyResult('b').outputs).toEqual([]);
  });
});
