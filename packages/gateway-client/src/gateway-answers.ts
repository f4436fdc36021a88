// What a gateway's error answers say: Enterprise Gateway's and the embedded gateway's capacity and launch-timeout
// refusals, Jupyter's `{ message, reason, traceback }` bodies, and the typed error of a refused create.
import { GatewayBusyError, GatewayCapacityError, KernelStartError } from './errors.js';

/**
 * The error of a refused create (`status`, `body`: the answer): capacity and start-queue answers (HTTP 503 with a
 * reason, Enterprise Gateway's 403 limits and 500 launch timeout) typed as such. `redact` hides the token.
 */
export function createRefusedError(
  answer: { readonly status: number; readonly body: string },
  name: string,
  baseUrl: string,
  redact: (text: string) => string,
): KernelStartError | GatewayBusyError {
  const text = answer.body.trim();
  const summary = summarizeErrorBody(text);
  const clipped = summary.length > 300 ? `${summary.slice(0, 300)}…` : summary;
  const detail = clipped ? `: ${redact(clipped)}` : '';
  const refused =
    answer.status === 503
      ? capacityAnswer(text)
      : answer.status === 403
        ? resourceLimitAnswer(text)
        : answer.status === 500
          ? launchTimeoutAnswer(text)
          : undefined;
  const message = `Failed to create kernel "${name}" on gateway ${baseUrl}: HTTP ${answer.status}${detail}`;
  if (refused?.reason === 'at-capacity') {
    return new GatewayCapacityError(message, {
      status: answer.status,
      ...(refused.maxKernels === undefined ? {} : { maxKernels: refused.maxKernels }),
    });
  }
  if (refused?.reason === 'busy') {
    return new GatewayBusyError(message, {
      ...(refused.waitedMs === undefined ? {} : { waitedMs: refused.waitedMs }),
    });
  }
  return new KernelStartError(message, { status: answer.status });
}

/**
 * Enterprise Gateway's 403 at its kernel limits: `{ reason: 'Forbidden', message: 'Resource Limit' }` (its
 * `max_kernels` check in the handler), or the kernel manager's "A max kernels limit has been set to N …" / "A max
 * kernels per user limit has been set to N …".
 */
export function resourceLimitAnswer(text: string): { reason: 'at-capacity'; maxKernels?: number } | undefined {
  if (!text.startsWith('{')) return undefined;
  try {
    const body = JSON.parse(text) as { message?: unknown; reason?: unknown };
    const said = [body.message, body.reason].filter((v): v is string => typeof v === 'string').join(' ');
    if (/\bResource Limit\b/i.test(said)) return { reason: 'at-capacity' };
    const limit = /max kernels (?:per user )?limit has been set to (\d+)/i.exec(said);
    if (limit) return { reason: 'at-capacity', maxKernels: Number(limit[1]) };
    return undefined;
  } catch {
    return undefined;
  }
}

/**
 * Enterprise Gateway's 500 when a launch outlived its `KERNEL_LAUNCH_TIMEOUT`: a reason like "KernelID: '…' launch
 * timeout due to: Waited too long (30.0s) to get connection file" (it killed the kernel itself).
 */
export function launchTimeoutAnswer(text: string): { reason: 'busy'; waitedMs?: number } | undefined {
  if (!text.startsWith('{')) return undefined;
  try {
    const body = JSON.parse(text) as { message?: unknown; reason?: unknown };
    const said = [body.message, body.reason].filter((v): v is string => typeof v === 'string').join(' ');
    if (!/launch timeout/i.test(said)) return undefined;
    const waited = /\((\d+(?:\.\d+)?)s\)/.exec(said);
    return waited ? { reason: 'busy', waitedMs: Math.round(Number(waited[1]) * 1000) } : { reason: 'busy' };
  } catch {
    return undefined;
  }
}

/** The embedded gateway's 503 body: `{ reason: 'at-capacity' | 'busy', max_kernels?, waited_ms? }`. */
export function capacityAnswer(
  text: string,
): { reason: 'at-capacity' | 'busy'; maxKernels?: number; waitedMs?: number } | undefined {
  if (!text.startsWith('{')) return undefined;
  try {
    const body = JSON.parse(text) as { reason?: unknown; max_kernels?: unknown; waited_ms?: unknown };
    if (body.reason !== 'at-capacity' && body.reason !== 'busy') return undefined;
    return {
      reason: body.reason,
      ...(typeof body.max_kernels === 'number' ? { maxKernels: body.max_kernels } : {}),
      ...(typeof body.waited_ms === 'number' ? { waitedMs: body.waited_ms } : {}),
    };
  } catch {
    return undefined;
  }
}

/** What a failed send is put down to in messages: the system error code when there is one. */
export function describeCause(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
  if (cause && typeof cause.code === 'string') return cause.code;
  if (error instanceof Error) return error.message;
  return String(error);
}

/**
 * Jupyter servers answer errors with `{ message, reason, traceback }`: keep the message, the reason and the
 * traceback's last line (the exception itself, e.g. `FileNotFoundError: … 'R'`), not the whole traceback.
 */
export function summarizeErrorBody(text: string): string {
  if (!text.startsWith('{')) return text;
  try {
    const body = JSON.parse(text) as { message?: unknown; reason?: unknown; traceback?: unknown };
    const parts: string[] = [];
    if (typeof body.message === 'string' && body.message) parts.push(body.message);
    if (typeof body.reason === 'string' && body.reason && body.reason !== body.message) parts.push(body.reason);
    if (typeof body.traceback === 'string') {
      const last = body.traceback
        .split('\n')
        .map((line) => line.trim())
        .filter(Boolean)
        .at(-1);
      if (last && !parts.includes(last)) parts.push(last);
    }
    return parts.length > 0 ? parts.join(' — ') : text;
  } catch {
    return text;
  }
}
