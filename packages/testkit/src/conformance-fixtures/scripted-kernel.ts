import type { ExecuteResult, Output } from '@kernelwarden/core';
import { okResult, type RecordingKernelScript } from '../recording-kernel.js';
import type { ConformanceCode } from '../vitest.js';

/**
 * A scripted RecordingKernel: a tiny line language (`print x`, `set n 1`, `printvar n`, `raise m`, `sleep ms`,
 * `input p`, `rich`) with state kept in `kernel.state`, interrupts through `releaseOnInterrupt`.
 */
export const scriptedLanguage: RecordingKernelScript = async (code, opts, kernel) => {
  kernel.executeRelease.reset();
  const result: ExecuteResult = { ...okResult(opts.cellId) };
  const emit = (o: Output) => {
    result.outputs.push(o);
    if (o.type === 'stream') result[o.name] += o.text;
    opts.onOutput?.(o);
  };
  const fail = (ename: string, evalue: string) => {
    const error = { ename, evalue, traceback: [`${ename}: ${evalue}`] };
    emit({ type: 'error', ...error });
    return { ...result, status: 'error' as const, error };
  };
  for (const line of code.split('\n')) {
    const [op, ...rest] = line.split(' ');
    const arg = rest.join(' ');
    if (op === 'print') emit({ type: 'stream', name: 'stdout', text: `${arg}\n` });
    else if (op === 'set') kernel.state.set(rest[0] as string, rest[1]);
    else if (op === 'printvar') {
      if (!kernel.state.has(arg)) return fail('NameError', `name '${arg}' is not defined`);
      emit({ type: 'stream', name: 'stdout', text: `${kernel.state.get(arg)}\n` });
    } else if (op === 'raise') return fail('RuntimeError', arg);
    else if (op === 'sleep') {
      let timer: NodeJS.Timeout | undefined;
      const slept = new Promise<'slept'>((resolve) => {
        timer = setTimeout(() => resolve('slept'), Number(arg));
      });
      const how = await Promise.race([
        slept,
        kernel.executeRelease.wait(opts.signal).then(() => 'interrupted' as const),
      ]).finally(() => clearTimeout(timer));
      if (how === 'interrupted') return fail('KeyboardInterrupt', '');
    } else if (op === 'input') {
      if (!opts.onInput) return fail('StdinNotImplementedError', 'stdin is not allowed');
      result.stdinRequested = true;
      emit({ type: 'stream', name: 'stdout', text: `${await opts.onInput({ prompt: arg, password: false })}\n` });
    } else if (op === 'rich') {
      emit({ type: 'display_data', data: { 'text/html': '<b>rich</b>', 'text/plain': 'rich' }, metadata: {} });
    }
  }
  return result;
};

/** The conformance snippets in that line language. */
export const scriptedCode: ConformanceCode = {
  setVar: (name, value) => `set ${name} ${value}`,
  printVar: (name) => `printvar ${name}`,
  print: (text) => `print ${text}`,
  raise: (message) => `raise ${message}`,
  sleep: (ms) => `sleep ${ms}`,
  input: (prompt) => `input ${prompt}`,
  richOutput: () => 'rich',
};
