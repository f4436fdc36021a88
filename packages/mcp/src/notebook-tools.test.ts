import { emptyResult } from '@kernelwarden/core';
import { describe, expect, it } from 'vitest';
import { CellRecord, MAX_RECORDED_BYTES, MAX_RECORDED_CELLS } from './notebook-tools.js';

describe('CellRecord (what save_notebook writes)', () => {
  it(`keeps the last ${MAX_RECORDED_CELLS} cells of a language and counts the ones dropped`, () => {
    const record = new CellRecord();
    for (let i = 0; i < MAX_RECORDED_CELLS + 5; i++) record.add('python', `x = ${i}`, emptyResult('c'));
    record.add('r', 'y <- 1', emptyResult('c'));
    expect(record.cells('python')).toHaveLength(MAX_RECORDED_CELLS);
    expect(record.cells('python')[0]?.code).toBe('x = 5');
    expect(record.dropped('python')).toBe(5);
    expect(record.cells('r').map((c) => c.code)).toEqual(['y <- 1']);
    expect(record.dropped('r')).toBe(0);
  });

  it('drops the oldest cells once their outputs pass the byte bound', () => {
    const record = new CellRecord();
    const big = () => ({
      ...emptyResult('c'),
      outputs: [{ type: 'stream' as const, name: 'stdout' as const, text: 'x'.repeat(MAX_RECORDED_BYTES / 3) }],
    });
    for (let i = 0; i < 4; i++) record.add('python', `big${i}`, big());
    expect(record.cells('python').map((c) => c.code)).toEqual(['big2', 'big3']);
    expect(record.dropped('python')).toBe(2);
  });
});
