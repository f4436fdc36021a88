import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { endOfInput, LineReader, StdinInput } from './stdin-input.js';

function sink() {
  let text = '';
  return {
    write: (t: string) => {
      text += t;
    },
    get text() {
      return text;
    },
  };
}

describe('LineReader', () => {
  it('hands over one line per call, CRLF or LF, the last without a newline, then end of input', async () => {
    const stream = new PassThrough();
    const reader = new LineReader(stream);
    stream.end('one\r\ntwo\nthree');
    expect(await reader.next()).toBe('one');
    expect(await reader.next()).toBe('two');
    expect(await reader.next()).toBe('three');
    expect(await reader.next()).toBeUndefined();
  });

  it('reads nothing until a line is asked for', () => {
    const stream = new PassThrough();
    stream.write('kept\n');
    new LineReader(stream);
    expect(stream.read()?.toString()).toBe('kept\n');
  });
});

describe('StdinInput', () => {
  it('prints the prompt (a password prompt on stderr) and answers end of input per language', async () => {
    const stdin = new PassThrough();
    const out = sink();
    const err = sink();
    const input = new StdinInput({ stdin, stdout: out, stderr: err, onInterrupt: () => {} });
    stdin.end('ann\n');
    expect(await input.answer({ prompt: 'name? ', password: false }, 'python')).toBe('ann');
    expect(await input.answer({ prompt: 'pw: ', password: true }, 'python')).toBe(endOfInput('python'));
    expect(await input.answer({ prompt: '', password: false }, 'r')).toBe('');
    expect(out.text).toBe('name? ');
    expect(err.text).toBe('pw: ');
    input.close();
  });

  it('answers end of input at once when standard input was the script', async () => {
    const input = new StdinInput({
      stdin: new PassThrough(),
      stdout: sink(),
      stderr: sink(),
      onInterrupt: () => {},
      consumed: true,
    });
    expect(await input.answer({ prompt: 'x', password: false }, 'python')).toBe('\x04');
  });
});
