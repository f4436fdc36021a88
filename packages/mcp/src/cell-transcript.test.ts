import { describe, expect, it } from 'vitest';
import { CellTranscript } from './cell-transcript.js';

const limits = { maxTextChars: 32_000, maxImages: 2, maxImageBytes: 1_000 };
const png = (bytes: number) => Buffer.alloc(bytes, 7).toString('base64');

describe('CellTranscript', () => {
  it('joins streams, results and tracebacks in arrival order, without colour codes', () => {
    const t = new CellTranscript(limits);
    t.onOutput({ type: 'stream', name: 'stdout', text: 'a' });
    t.onOutput({ type: 'execute_result', data: { 'text/plain': '\x1b[32m42\x1b[0m' }, metadata: {} });
    t.onOutput({ type: 'stream', name: 'stderr', text: 'warn\n' });
    t.onOutput({
      type: 'error',
      ename: 'ValueError',
      evalue: 'bad',
      traceback: ['\x1b[0;31m---------\x1b[0m', '\x1b[0;31mValueError\x1b[0m: bad'],
    });
    const result = t.finish({ isError: true });
    expect(result).toEqual({
      content: [{ type: 'text', text: 'a\n42\nwarn\n---------\nValueError: bad\n' }],
      isError: true,
    });
  });

  it('adds the error name and message when the traceback lacks them (R often sends none)', () => {
    const t = new CellTranscript(limits);
    t.onOutput({ type: 'error', ename: 'ERROR', evalue: 'object not found', traceback: [] });
    expect(t.finish({ isError: true }).content[0]).toEqual({ type: 'text', text: 'ERROR: object not found\n' });
  });

  it('adds an error that only the result holds, once', () => {
    const t = new CellTranscript(limits);
    t.addResult({
      status: 'error',
      cellId: 'c',
      stdout: '',
      stderr: '',
      outputs: [],
      error: { ename: 'RKernelUnavailable', evalue: 'R kernel unavailable: no ir kernelspec', traceback: [] },
      cancelled: false,
      timedOut: false,
      stdinRequested: false,
      truncated: false,
    });
    expect(t.finish({ isError: true }).content[0]).toEqual({
      type: 'text',
      text: 'RKernelUnavailable: R kernel unavailable: no ir kernelspec\n',
    });
  });

  it('passes PNG and JPEG as images, and names the images left out by count or size', () => {
    const t = new CellTranscript(limits);
    const small = png(100);
    t.onOutput({ type: 'display_data', data: { 'image/png': `${small}\n`, 'text/plain': '<Figure>' }, metadata: {} });
    t.onOutput({ type: 'display_data', data: { 'image/png': png(5_000), 'text/plain': '<Big>' }, metadata: {} });
    t.onOutput({ type: 'display_data', data: { 'image/jpeg': small }, metadata: {} });
    t.onOutput({ type: 'display_data', data: { 'image/png': small }, metadata: {} });
    const result = t.finish({ isError: false });
    expect(result.content.filter((c) => c.type === 'image')).toEqual([
      { type: 'image', data: small, mimeType: 'image/png' },
      { type: 'image', data: small, mimeType: 'image/jpeg' },
    ]);
    const text = (result.content[0] as { text: string }).text;
    expect(text).toContain('<Big>');
    expect(text).toContain('[image 2 (image/png, 5 KiB) left out: larger than the 1 KiB cap]');
    expect(text).toContain('[image 4 (image/png, 1 KiB) left out: at most 2 per result]');
    expect(text).not.toContain('<Figure>');
  });

  it('names rich outputs it cannot show, and says (no output) for a silent cell', () => {
    const t = new CellTranscript(limits);
    t.onOutput({ type: 'display_data', data: { 'text/html': '<b>x</b>' }, metadata: {} });
    expect(t.finish({ isError: false }).content).toEqual([{ type: 'text', text: '[text/html output not shown]\n' }]);
    expect(new CellTranscript(limits).finish({ isError: false }).content).toEqual([
      { type: 'text', text: '(no output)' },
    ]);
  });

  it('puts the notice after the capped text', () => {
    const t = new CellTranscript({ ...limits, maxTextChars: 200 });
    t.onOutput({ type: 'stream', name: 'stdout', text: 'x'.repeat(1_000) });
    const text = (
      t.finish({ isError: true, notice: 'The cell ran past its 2s timeout.' }).content[0] as { text: string }
    ).text;
    expect(text).toMatch(/^x{100}\n\[… 800 characters/);
    expect(text.endsWith('\n\nThe cell ran past its 2s timeout.')).toBe(true);
  });
});
