// What `check_background` answers about a background cell.
import type { BackgroundPeek } from '@kernelwarden/supervisor';
import { CellTranscript, type KernelToolResult } from './cell-transcript.js';
import type { ResolvedKernelToolOptions } from './tool-options.js';

/**
 * A background cell's answer: its whole result once it ended (unless its output was cut), else its stdout and stderr
 * so far, then a line saying whether it is running, finished or failed.
 */
export function backgroundAnswer(
  execId: string,
  peek: BackgroundPeek,
  options: ResolvedKernelToolOptions,
): KernelToolResult {
  const transcript = new CellTranscript(options);
  if (peek.result && !peek.truncated) {
    for (const output of peek.result.outputs) transcript.onOutput(output);
    transcript.addResult(peek.result);
  } else {
    transcript.onOutput({ type: 'stream', name: 'stdout', text: peek.stdout });
    transcript.onOutput({ type: 'stream', name: 'stderr', text: peek.stderr });
  }
  const status =
    peek.status === 'running'
      ? `Background cell ${execId} is still running; this is its output so far.`
      : `Background cell ${execId} ${peek.status === 'done' ? 'finished' : peek.status}${peek.error ? `: ${peek.error}` : ''}.`;
  return transcript.finish({ isError: peek.status === 'failed', notice: status });
}
