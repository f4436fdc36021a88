import { isKernelId } from '@kernelwarden/gateway-client';
import type { Command } from './command-types.js';
import { parseFlags } from './parse-flags.js';
import { UsageError } from './usage-error.js';

/** Parses `kernelwarden gateway <action> [--json] [--lines N] [--kernel ID|all]`. */
export function parseGateway(args: readonly string[]): Command {
  const { values, positionals } = parseFlags('gateway', args, {
    json: { type: 'boolean' },
    lines: { type: 'string', short: 'n' },
    kernel: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) return { command: 'help', topic: 'gateway' };
  const [action, extra] = positionals;
  if (action === undefined) {
    throw new UsageError('gateway needs an action: start, status, stop or logs', { command: 'gateway' });
  }
  if (action !== 'start' && action !== 'status' && action !== 'stop' && action !== 'logs') {
    throw new UsageError(`unknown gateway action "${action}": use start, status, stop or logs`, { command: 'gateway' });
  }
  if (extra !== undefined)
    throw new UsageError(`gateway ${action} takes no argument: "${extra}"`, { command: 'gateway' });
  let lines = 50;
  if (values.lines !== undefined) {
    const n = Number(values.lines);
    if (!Number.isInteger(n) || n < 1) {
      throw new UsageError(`--lines "${values.lines}" is not a positive whole number, e.g. --lines 100`, {
        command: 'gateway',
      });
    }
    lines = n;
  }
  const kernel = values.kernel as string | undefined;
  if (kernel !== undefined && action !== 'logs') {
    throw new UsageError('--kernel goes with gateway logs', { command: 'gateway' });
  }
  if (kernel !== undefined && kernel !== 'all' && !isKernelId(kernel)) {
    throw new UsageError(`--kernel "${kernel}" is not a kernel id (see gateway status) or "all"`, {
      command: 'gateway',
    });
  }
  return { command: 'gateway', action, json: values.json === true, lines, ...(kernel ? { kernel } : {}) };
}
