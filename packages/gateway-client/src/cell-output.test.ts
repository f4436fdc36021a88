import type { Output } from '@kernelwarden/core';
import { describe, expect, it } from 'vitest';
import { CellOutput, DEFAULT_OUTPUT_CAPS, sizeWithin, TextBuffer } from './cell-output.js';

describe('CellOutput', () => {
  it('joins 20,000 small chunks into the same text, one entry per run of a stream', () => {
    const output = new CellOutput(DEFAULT_OUTPUT_CAPS);
    for (let i = 0; i < 10_000; i++) output.stream('stdout', `${i}\n`);
    output.stream('stderr', 'warn\n');
    output.rich({ type: 'display_data', data: { 'text/plain': 'shown' }, metadata: {} });
    for (let i = 10_000; i < 20_000; i++) output.stream('stdout', `${i}\n`);
    const result = output.collected();
    const expected = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, i) => `${from + i}\n`).join('');
    expect(result.stdout).toBe(expected(0, 20_000));
    expect(result.stderr).toBe('warn\n');
    expect(result.outputs.map((o) => o.type === 'stream' && o.text.length)).toEqual([
      expected(0, 10_000).length,
      5,
      false,
      expected(10_000, 20_000).length,
    ]);
    expect(result.outputs[3]).toEqual({ type: 'stream', name: 'stdout', text: expected(10_000, 20_000) });
    expect(result.truncated).toBe(false);
  });

  it('cuts at the caps across folds and says truncated', () => {
    const output = new CellOutput({ ...DEFAULT_OUTPUT_CAPS, maxStreamChars: 12_345, maxOutputs: 5 });
    for (let i = 0; i < 5000; i++) output.stream('stdout', 'abcdefghij');
    const result = output.collected();
    expect(result.stdout).toBe('abcdefghij'.repeat(1235).slice(0, 12_345));
    expect(result.outputs).toEqual([{ type: 'stream', name: 'stdout', text: result.stdout }]);
    expect(result.truncated).toBe(true);
  });

  it('keeps at most maxOutputs entries, while onOutput still sees every output, in order', () => {
    const seen: Output[] = [];
    const output = new CellOutput({ ...DEFAULT_OUTPUT_CAPS, maxStreamChars: 100, maxOutputs: 2 }, (o) => seen.push(o));
    output.stream('stdout', 'a');
    output.rich({ type: 'execute_result', data: { 'text/plain': '1' }, metadata: {} });
    output.stream('stderr', 'b');
    output.rich({ type: 'error', ename: 'E', evalue: 'v', traceback: [] });
    const result = output.collected();
    expect(result.outputs.map((o) => o.type)).toEqual(['stream', 'execute_result']);
    expect(result.stderr).toBe('b');
    expect(result.truncated).toBe(true);
    expect(seen.map((o) => o.type)).toEqual(['stream', 'execute_result', 'stream', 'error']);
  });

  it('keeps rich outputs up to maxOutputBytes, while onOutput still sees every one; a later one that fits is kept', () => {
    const seen: Output[] = [];
    const MiB = 1024 * 1024;
    const output = new CellOutput({ ...DEFAULT_OUTPUT_CAPS, maxOutputBytes: 8 * MiB }, (o) => seen.push(o));
    // 320 rich outputs of 1 MiB each: without a byte cap the result would hold all of them (320 MiB).
    for (let i = 0; i < 320; i++) {
      output.rich({ type: 'display_data', data: { 'image/png': String(i % 10).repeat(MiB) }, metadata: {} });
    }
    output.rich({ type: 'error', ename: 'ValueError', evalue: 'bad', traceback: ['line'] });
    const result = output.collected();
    expect(seen).toHaveLength(321);
    expect(result.outputs).toHaveLength(8);
    expect(result.outputs.slice(0, 7).every((o) => o.type === 'display_data')).toBe(true);
    expect(result.outputs.at(-1)).toMatchObject({ type: 'error', ename: 'ValueError' });
    expect(result.truncated).toBe(true);
  });

  it('keeps nothing rich with maxOutputBytes 0, and measures a deeply nested value without recursion', () => {
    const output = new CellOutput({ ...DEFAULT_OUTPUT_CAPS, maxOutputBytes: 0 });
    output.rich({ type: 'execute_result', data: { 'text/plain': '1' }, metadata: {} });
    expect(output.collected()).toMatchObject({ outputs: [], truncated: true });
    let deep: unknown = 'leaf';
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(sizeWithin(deep, Number.MAX_SAFE_INTEGER)).toBe(8 * 200_000 + 6);
    expect(sizeWithin({ a: 'x'.repeat(100) }, 50)).toBeGreaterThan(50);
    expect(sizeWithin({ 'text/plain': 'abc' }, 1000)).toBe(8 + 'text/plain'.length + 3 + 3 + 2);
  });

  it('survives an onOutput that throws', () => {
    const output = new CellOutput(DEFAULT_OUTPUT_CAPS, () => {
      throw new Error('listener bug');
    });
    output.stream('stdout', 'x');
    expect(output.collected().stdout).toBe('x');
  });
});

describe('TextBuffer', () => {
  it('keeps the text of every chunk in order, across folds, and counts its length', () => {
    const buffer = new TextBuffer();
    for (let i = 0; i < 1500; i++) buffer.append(String(i % 10));
    expect(buffer.length).toBe(1500);
    expect(buffer.toString()).toBe('0123456789'.repeat(150));
  });
});
