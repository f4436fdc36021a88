// Small pieces of the text the kernel tools answer a model with.
import type { KernelToolResult } from './cell-transcript.js';

/** A result of one text block. */
export function text(message: string, isError: boolean): KernelToolResult {
  return { content: [{ type: 'text', text: message }], isError };
}

/** `cell-a`, `cell-a and cell-b`. */
export function cells(ids: string[]): string {
  return ids.length <= 1 ? (ids[0] ?? '') : `${ids.slice(0, -1).join(', ')} and ${ids.at(-1)}`;
}

/** A duration in seconds: `30s`, `0.25s`. */
export function seconds(ms: number): string {
  const s = ms / 1000;
  return `${Number.isInteger(s) ? s : Number(s.toFixed(3))}s`;
}

/** An error's message, or the thrown value as text. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
