import type { ExecuteResult } from '@kernelwarden/core';
import { createMessage } from '@kernelwarden/jupyter-protocol';
import { describe, expect, it } from 'vitest';
import { CellExecution, DEFAULT_OUTPUT_CAPS, type OutputCaps } from './execution.js';

function run(feed: (execution: CellExecution) => void, caps: OutputCaps = DEFAULT_OUTPUT_CAPS): ExecuteResult {
  let result: ExecuteResult | undefined;
  const execution = new CellExecution(
    'm',
    'c',
    {},
    caps,
    (r) => (result = r),
    () => {},
  );
  feed(execution);
  execution.complete();
  if (!result) throw new Error('not completed');
  return result;
}

const stream = (name: string, text: string) => createMessage('iopub', 'stream', 'k', { name, text });

describe('CellExecution output collection', () => {
  it('joins 20,000 small chunks into the same text, one entry per run of a stream', () => {
    const result = run((e) => {
      for (let i = 0; i < 10_000; i++) e.iopub(stream('stdout', `${i}\n`));
      e.iopub(stream('stderr', 'warn\n'));
      e.iopub(createMessage('iopub', 'display_data', 'k', { data: { 'text/plain': 'shown' }, metadata: {} }));
      for (let i = 10_000; i < 20_000; i++) e.iopub(stream('stdout', `${i}\n`));
    });
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
    const result = run(
      (e) => {
        for (let i = 0; i < 5000; i++) e.iopub(stream('stdout', 'abcdefghij'));
      },
      { maxStreamChars: 12_345, maxOutputs: 5 },
    );
    expect(result.stdout).toBe('abcdefghij'.repeat(1235).slice(0, 12_345));
    expect(result.outputs).toEqual([{ type: 'stream', name: 'stdout', text: result.stdout }]);
    expect(result.truncated).toBe(true);
  });
});
