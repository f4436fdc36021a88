import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExecuteResult } from '@kernelwarden/core';
import { MISSING_REPLY_ENAME } from '@kernelwarden/gateway-client';
import { okResult } from '@kernelwarden/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { OutputPrinter } from './output-printer.js';

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

function sink(isTTY = false) {
  let text = '';
  return {
    isTTY,
    write: (t: string) => {
      text += t;
    },
    get text() {
      return text;
    },
  };
}

function result(over: Partial<ExecuteResult> = {}): ExecuteResult {
  return { ...okResult('c1'), ...over };
}

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('OutputPrinter', () => {
  it('sends stdout to stdout, stderr and tracebacks to stderr, without colour on a pipe', () => {
    const out = sink();
    const err = sink();
    const printer = new OutputPrinter({ stdout: out, stderr: err, filePrefix: 'c1' });
    printer.onOutput({ type: 'stream', name: 'stdout', text: '2\n' });
    printer.onOutput({ type: 'stream', name: 'stderr', text: 'warning\n' });
    printer.onOutput({
      type: 'error',
      ename: 'ZeroDivisionError',
      evalue: 'division by zero',
      traceback: [
        '\x1b[0;31mZeroDivisionError\x1b[0m Traceback',
        '\x1b[0;31mZeroDivisionError\x1b[0m: division by zero',
      ],
    });
    printer.finish(
      result({ status: 'error', error: { ename: 'ZeroDivisionError', evalue: 'division by zero', traceback: [] } }),
    );
    expect(out.text).toBe('2\n');
    expect(err.text).toBe('warning\nZeroDivisionError Traceback\nZeroDivisionError: division by zero\n');
  });

  it('names the frame limit when a message over maxFrameBytes was dropped, the iopub rate limit otherwise', () => {
    const framed = sink();
    new OutputPrinter({ stdout: sink(), stderr: framed, filePrefix: 'c1' }).finish(
      result({
        status: 'error',
        outputDropped: true,
        error: {
          ename: MISSING_REPLY_ENAME,
          evalue:
            'the kernel sent a malformed message for the cell, which was dropped: The channels WebSocket of kernel k received a 70000000-byte frame, more than maxFrameBytes (67108864); it was dropped unread',
          traceback: [],
        },
      }),
    );
    expect(framed.text).toContain(
      'kernelwarden: some output was dropped: a message of the kernel was larger than the frame limit (maxFrameBytes)',
    );
    expect(framed.text).not.toContain('iopub');
    const rated = sink();
    new OutputPrinter({ stdout: sink(), stderr: rated, filePrefix: 'c1' }).finish(result({ outputDropped: true }));
    expect(rated.text).toBe(
      "kernelwarden: some output was dropped: the gateway dropped it (its iopub rate limit) or it was lost while the kernel's connection was reopened\n",
    );
  });

  it('prints the reply error when no error output was streamed', () => {
    const err = sink();
    const printer = new OutputPrinter({ stdout: sink(), stderr: err, filePrefix: 'c1' });
    printer.finish(result({ status: 'error', error: { ename: 'Error', evalue: 'boom', traceback: [] } }));
    expect(err.text).toBe('Error: boom\n');
  });

  it('prints text/plain results, and saves images to --outputs-dir saying where', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kw-printer-'));
    dirs.push(dir);
    const out = sink();
    const err = sink();
    const printer = new OutputPrinter({ stdout: out, stderr: err, outputsDir: join(dir, 'plots'), filePrefix: 'c1' });
    printer.onOutput({ type: 'execute_result', data: { 'text/plain': '42' }, metadata: {} });
    printer.onOutput({
      type: 'display_data',
      data: { 'image/png': PNG.toString('base64'), 'text/plain': 'plot without title' },
      metadata: {},
    });
    expect(out.text).toBe('42\n');
    expect(printer.saved).toEqual([{ mime: 'image/png', path: join(dir, 'plots', 'c1-1.png'), bytes: PNG.length }]);
    expect(readFileSync(join(dir, 'plots', 'c1-1.png')).equals(PNG)).toBe(true);
    expect(err.text).toMatch(/^kernelwarden: saved image\/png to .*c1-1\.png\n$/);
  });

  it('says how to keep images when there is no --outputs-dir', () => {
    const err = sink();
    const printer = new OutputPrinter({ stdout: sink(), stderr: err, filePrefix: 'c1' });
    printer.onOutput({ type: 'display_data', data: { 'image/png': 'AAAA', 'image/svg+xml': '<svg/>' }, metadata: {} });
    printer.finish(result());
    expect(err.text).toBe('kernelwarden: 1 image output not saved; pass --outputs-dir DIR to keep it\n');
  });

  it('prints nothing when quiet (--json) but still saves files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kw-printer-'));
    dirs.push(dir);
    const out = sink();
    const err = sink();
    const printer = new OutputPrinter({ stdout: out, stderr: err, outputsDir: dir, quiet: true, filePrefix: 'x' });
    printer.onOutput({ type: 'stream', name: 'stdout', text: 'hi' });
    printer.onOutput({ type: 'display_data', data: { 'image/png': PNG.toString('base64') }, metadata: {} });
    printer.finish(result({ status: 'error', error: { ename: 'E', evalue: 'v', traceback: ['t'] } }));
    expect([out.text, err.text]).toEqual(['', '']);
    expect(printer.saved).toHaveLength(1);
  });

  it('saves at most --max-images images and --max-images-size bytes per cell, and says what it left out', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kw-printer-'));
    dirs.push(dir);
    const err = sink();
    const printer = new OutputPrinter({
      stdout: sink(),
      stderr: err,
      outputsDir: dir,
      filePrefix: 'c',
      maxImages: 3,
      maxImageBytes: 2 * PNG.length,
    });
    for (let i = 0; i < 5; i++) {
      printer.onOutput({ type: 'display_data', data: { 'image/png': PNG.toString('base64') }, metadata: {} });
    }
    printer.finish(result());
    expect(printer.saved).toHaveLength(2);
    expect(readdirSync(dir).sort()).toEqual(['c-1.png', 'c-2.png']);
    expect(printer.unsaved).toEqual({ noOutputsDir: 0, overCount: 0, overSize: 3, refused: 0, bytes: 3 * PNG.length });
    expect(err.text).toContain(
      'kernelwarden: 3 image outputs not saved: past --max-images-size 32 bytes of images for the cell (pass --max-images-size SIZE to keep more)\n',
    );

    const counted = new OutputPrinter({
      stdout: sink(),
      stderr: sink(),
      outputsDir: dir,
      filePrefix: 'n',
      maxImages: 1,
    });
    counted.onOutput({ type: 'display_data', data: { 'image/png': PNG.toString('base64') }, metadata: {} });
    counted.onOutput({ type: 'display_data', data: { 'image/svg+xml': '<svg/>' }, metadata: {} });
    expect(counted.saved).toHaveLength(1);
    expect(counted.notes()).toEqual([
      '1 image output not saved: past --max-images 1 (pass --max-images N to keep more)',
    ]);
  });

  it('saves 100 images and 64 MiB per cell by default', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kw-printer-'));
    dirs.push(dir);
    const printer = new OutputPrinter({
      stdout: sink(),
      stderr: sink(),
      outputsDir: dir,
      quiet: true,
      filePrefix: 'd',
    });
    for (let i = 0; i < 101; i++) {
      printer.onOutput({ type: 'display_data', data: { 'image/png': PNG.toString('base64') }, metadata: {} });
    }
    expect(printer.saved).toHaveLength(100);
    expect(printer.unsaved.overCount).toBe(1);
    const big = Buffer.alloc(40 * 1024 * 1024).toString('base64');
    const sized = new OutputPrinter({ stdout: sink(), stderr: sink(), outputsDir: dir, quiet: true, filePrefix: 'e' });
    sized.onOutput({ type: 'display_data', data: { 'image/png': big }, metadata: {} });
    sized.onOutput({ type: 'display_data', data: { 'image/png': big }, metadata: {} });
    expect(sized.saved.map((f) => f.bytes)).toEqual([40 * 1024 * 1024]);
    expect(sized.unsaved).toMatchObject({ overSize: 1, bytes: 40 * 1024 * 1024 });
  });

  it("shows a kernel's title, clipboard, screen-clear and DCS sequences escaped on a terminal, keeping colours", () => {
    const out = sink(true);
    const err = sink(true);
    const printer = new OutputPrinter({ stdout: out, stderr: err, filePrefix: 'c1' });
    printer.onOutput({ type: 'stream', name: 'stdout', text: '\x1b]0;pwned\x07\x1b[32mok\x1b' });
    printer.onOutput({ type: 'stream', name: 'stdout', text: '[0m\x1b]52;c;aGk=\x07\n' });
    printer.onOutput({ type: 'stream', name: 'stderr', text: '\x1b[2J\x9b2J\x1bP+q\x1b\\\n' });
    printer.onOutput({ type: 'execute_result', data: { 'text/plain': "'\x1b]0;t\x07'" }, metadata: {} });
    printer.onOutput({
      type: 'error',
      ename: 'E',
      evalue: 'v',
      traceback: ['\x1b[0;31mE\x1b[0m: \x1b]0;t\x07v'],
    });
    printer.finish(result());
    expect(out.text).toBe("\\x1b]0;pwned\\x07\x1b[32mok\x1b[0m\\x1b]52;c;aGk=\\x07\n'\\x1b]0;t\\x07'\n");
    expect(err.text).toBe('\\x1b[2J\\x9b2J\\x1bP+q\\x1b\\\n\x1b[0;31mE\x1b[0m: \\x1b]0;t\\x07v\n');
  });

  it('gives a pipe the same without colours, and a lone ESC left at the end escaped', () => {
    const out = sink();
    const err = sink();
    const printer = new OutputPrinter({ stdout: out, stderr: err, filePrefix: 'c1' });
    printer.onOutput({ type: 'stream', name: 'stdout', text: '\x1b[31mred\x1b[0m \x1b]0;t\x07\x1b' });
    printer.finish(result());
    expect(out.text).toBe('red \\x1b]0;t\\x07\\x1b');
    expect(err.text).toBe('');
  });
});
