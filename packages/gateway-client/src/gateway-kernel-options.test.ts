import { readFile } from 'node:fs/promises';
import { InvalidOptionsError, systemClock } from '@kernelwarden/core';
import { describe, expect, it } from 'vitest';
import { DEFAULT_OUTPUT_CAPS } from './cell-output.js';
import { GatewayClient } from './gateway-client.js';
import {
  DEFAULT_MAX_RESPONSE_BYTES,
  DEFAULT_REQUEST_TIMEOUT_MS,
  resolveGatewayClientOptions,
} from './gateway-client-options.js';
import * as options from './gateway-kernel-options.js';
import { resolveGatewayKernelOptions } from './gateway-kernel-options.js';

/** Every defaulted option of `GatewayKernel.start()`, with the constant that holds its default. */
const KERNEL_DEFAULTS = {
  kernelName: ['DEFAULT_KERNEL_NAME', options.DEFAULT_KERNEL_NAME],
  startupTimeoutMs: ['DEFAULT_STARTUP_TIMEOUT_MS', options.DEFAULT_STARTUP_TIMEOUT_MS],
  protocol: ['DEFAULT_PROTOCOL', options.DEFAULT_PROTOCOL],
  maxFrameBytes: ['DEFAULT_MAX_FRAME_BYTES', options.DEFAULT_MAX_FRAME_BYTES],
  stallWorkaround: ['DEFAULT_STALL_WORKAROUND', options.DEFAULT_STALL_WORKAROUND],
  environmentStep: ['DEFAULT_ENVIRONMENT_STEP', options.DEFAULT_ENVIRONMENT_STEP],
  outputCaps: ['DEFAULT_OUTPUT_CAPS', DEFAULT_OUTPUT_CAPS],
  reconnect: ['DEFAULT_RECONNECT', options.DEFAULT_RECONNECT],
  livenessPollMs: ['DEFAULT_LIVENESS_POLL_MS', options.DEFAULT_LIVENESS_POLL_MS],
  livenessTimeoutMs: ['DEFAULT_LIVENESS_TIMEOUT_MS', options.DEFAULT_LIVENESS_TIMEOUT_MS],
  heartbeatMs: ['DEFAULT_HEARTBEAT_MS', options.DEFAULT_HEARTBEAT_MS],
  kernelInfoRetryMs: ['DEFAULT_KERNEL_INFO_RETRY_MS', options.DEFAULT_KERNEL_INFO_RETRY_MS],
  iopubNudgeMs: ['DEFAULT_IOPUB_NUDGE_MS', options.DEFAULT_IOPUB_NUDGE_MS],
  iopubNudges: ['DEFAULT_IOPUB_NUDGES', options.DEFAULT_IOPUB_NUDGES],
  interruptDrainMs: ['DEFAULT_INTERRUPT_DRAIN_MS', options.DEFAULT_INTERRUPT_DRAIN_MS],
  idleGraceMs: ['DEFAULT_IDLE_GRACE_MS', options.DEFAULT_IDLE_GRACE_MS],
  replyGraceMs: ['DEFAULT_REPLY_GRACE_MS', options.DEFAULT_REPLY_GRACE_MS],
  resumeFromJournal: ['DEFAULT_RESUME_FROM_JOURNAL', options.DEFAULT_RESUME_FROM_JOURNAL],
  stopOnError: ['DEFAULT_STOP_ON_ERROR', options.DEFAULT_STOP_ON_ERROR],
  createAttempts: ['DEFAULT_CREATE_ATTEMPTS', options.DEFAULT_CREATE_ATTEMPTS],
  createRetryDelayMs: ['DEFAULT_CREATE_RETRY_DELAY_MS', options.DEFAULT_CREATE_RETRY_DELAY_MS],
  restartTimeoutMs: ['DEFAULT_RESTART_TIMEOUT_MS', options.DEFAULT_RESTART_TIMEOUT_MS],
  recovery: ['DEFAULT_RECOVERY', options.DEFAULT_RECOVERY],
  shutdownTimeoutMs: ['DEFAULT_SHUTDOWN_TIMEOUT_MS', options.DEFAULT_SHUTDOWN_TIMEOUT_MS],
  cleanupTimeoutMs: ['DEFAULT_CLEANUP_TIMEOUT_MS', options.DEFAULT_CLEANUP_TIMEOUT_MS],
  cleanupRetry: ['DEFAULT_CLEANUP_RETRY', options.DEFAULT_CLEANUP_RETRY],
  abandonedCreateWaitMs: ['DEFAULT_ABANDONED_CREATE_WAIT_MS', options.DEFAULT_ABANDONED_CREATE_WAIT_MS],
} as const;

const CLIENT_DEFAULTS = {
  requestTimeoutMs: ['DEFAULT_REQUEST_TIMEOUT_MS', DEFAULT_REQUEST_TIMEOUT_MS],
  maxResponseBytes: ['DEFAULT_MAX_RESPONSE_BYTES', DEFAULT_MAX_RESPONSE_BYTES],
} as const;

/** A value as the README writes it: `60000`, `'auto'`, `true`, `{ attempts: 6, initialDelayMs: 100 }`. */
function written(value: unknown): string {
  if (typeof value === 'string') return `'${value}'`;
  if (value !== null && typeof value === 'object') {
    return `{ ${Object.entries(value)
      .map(([k, v]) => `${k}: ${written(v)}`)
      .join(', ')} }`;
  }
  return String(value);
}

/** The Default column of the README table that follows `heading`, by option name. */
async function readmeDefaults(heading: string): Promise<Map<string, string>> {
  const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf(heading));
  const rows = section.slice(0, section.indexOf('\n\n', section.indexOf('|---'))).split('\n');
  const defaults = new Map<string, string>();
  for (const row of rows.filter((r) => r.startsWith('| `'))) {
    const [name, value] = row.split(' | ').map((cell) => cell.replace(/^\| /, ''));
    for (const option of (name ?? '').split(', ')) defaults.set(option.replaceAll('`', ''), value ?? '');
  }
  return defaults;
}

const minimal = { gateway: { baseUrl: 'http://127.0.0.1:9' } };

describe('GatewayKernel.start() options', () => {
  it('applies every default from its exported constant', () => {
    const resolved = resolveGatewayKernelOptions(minimal);
    for (const [option, [, value]] of Object.entries(KERNEL_DEFAULTS)) {
      expect(resolved[option as keyof typeof resolved], option).toEqual(value);
    }
    expect(resolved.clock).toBe(systemClock);
    expect(resolved.client).toBeInstanceOf(GatewayClient);
    const defaulted = Object.keys(resolved).filter(
      (k) => !['client', 'cwd', 'env', 'launchEnv', 'prelude', 'signal', 'clock'].includes(k),
    );
    expect(defaulted.sort()).toEqual(Object.keys(KERNEL_DEFAULTS).sort());
  });

  it('documents each default in the README as the constant says, naming it', async () => {
    const documented = await readmeDefaults('### `GatewayKernel.start(options)');
    for (const [option, [constant, value]] of Object.entries(KERNEL_DEFAULTS)) {
      expect(documented.get(option), option).toBe(`\`${written(value)}\` (\`${constant}\`)`);
    }
    const named = [...documented].filter(([, cell]) => cell.includes('DEFAULT_')).map(([option]) => option);
    expect(named.sort()).toEqual(Object.keys(KERNEL_DEFAULTS).sort());
  });

  it('names the constant in the TSDoc @defaultValue of each option', async () => {
    const source = await readFile(new URL('./gateway-kernel-options.ts', import.meta.url), 'utf8');
    const body = source.slice(source.indexOf('export interface GatewayKernelStartOptions'));
    for (const [option, [constant]] of Object.entries(KERNEL_DEFAULTS)) {
      const doc = body.slice(0, body.indexOf(`\n  ${option}?:`));
      expect(doc.slice(doc.lastIndexOf('/**')), option).toContain(`@defaultValue {@link ${constant}}`);
    }
  });

  it('merges partial policies over their defaults', () => {
    const resolved = resolveGatewayKernelOptions({
      ...minimal,
      reconnect: { attempts: 1 },
      recovery: { timeoutMs: 10 },
      outputCaps: { maxOutputs: 2 },
    });
    expect(resolved.reconnect).toEqual({ ...options.DEFAULT_RECONNECT, attempts: 1 });
    expect(resolved.recovery).toEqual({ ...options.DEFAULT_RECOVERY, timeoutMs: 10 });
    expect(resolved.outputCaps).toEqual({ ...DEFAULT_OUTPUT_CAPS, maxOutputs: 2 });
  });

  it('names the bad field, with a gateway field under gateway.', () => {
    const bad = (o: object) => {
      try {
        resolveGatewayKernelOptions({ ...minimal, ...o });
      } catch (error) {
        return InvalidOptionsError.isInstance(error) ? error.path : 'not InvalidOptionsError';
      }
      return 'accepted';
    };
    expect(bad({ restartTimeoutMs: -1 })).toBe('restartTimeoutMs');
    expect(bad({ recovery: { attemptTimeoutMs: 0 } })).toBe('recovery.attemptTimeoutMs');
    expect(bad({ iopubNudges: 1.5 })).toBe('iopubNudges');
    expect(bad({ clock: { now: () => 0 } })).toBe('clock');
    expect(bad({ gateway: { baseUrl: 'ftp://x' } })).toBe('gateway.baseUrl');
    expect(bad({ maxFrameBytes: 0 })).toBe('maxFrameBytes');
    expect(bad({ outputCaps: { maxOutputBytes: -1 } })).toBe('outputCaps.maxOutputBytes');
    expect(bad({ gateway: { baseUrl: 'http://127.0.0.1:9', maxResponseBytes: 0 } })).toBe('gateway.maxResponseBytes');
    for (const kernelId of ['.', '..', 'a/b', '../x', 'a.b', '%2e%2e', 'x'.repeat(129)]) {
      expect(bad({ kernelId }), kernelId).toBe('kernelId');
    }
    expect(bad({ kernelId: '3f2c1a0e-7d1b-4c55-9a57-1b2c3d4e5f60' })).toBe('accepted');
  });
});

describe('GatewayClient options', () => {
  it('applies and documents the request timeout default', async () => {
    const resolved = resolveGatewayClientOptions({ baseUrl: 'http://127.0.0.1:9/base/', token: '' });
    expect(resolved).toMatchObject({ baseUrl: 'http://127.0.0.1:9/base', token: undefined, fetch: undefined });
    const documented = await readmeDefaults('### `new GatewayClient(options)`');
    for (const [option, [constant, value]] of Object.entries(CLIENT_DEFAULTS)) {
      expect(resolved[option as keyof typeof resolved]).toBe(value);
      expect(documented.get(option)).toBe(`\`${written(value)}\` (\`${constant}\`)`);
    }
  });

  it('sends creates through the create guard by default, unless the client has its own transport or an ownership', () => {
    expect(resolveGatewayClientOptions({ baseUrl: 'http://x' }).createGuard).toBe(true);
    expect(resolveGatewayClientOptions({ baseUrl: 'http://x', fetch: globalThis.fetch }).createGuard).toBe(false);
    const request = async () => ({ status: 200, text: async () => '' });
    expect(resolveGatewayClientOptions({ baseUrl: 'http://x', request }).createGuard).toBe(false);
    const ownership = { created() {}, deleted() {} };
    expect(resolveGatewayClientOptions({ baseUrl: 'http://x', ownership }).createGuard).toBe(false);
    expect(resolveGatewayClientOptions({ baseUrl: 'http://x', ownership, createGuard: true }).createGuard).toBe(true);
    expect(resolveGatewayClientOptions({ baseUrl: 'http://x', createGuard: false }).createGuard).toBe(false);
    let error: unknown;
    try {
      resolveGatewayClientOptions({ baseUrl: 'http://x', fetch: globalThis.fetch, createGuard: true });
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: 'INVALID_OPTIONS', message: expect.stringMatching(/createGuard/) });
  });

  it('names the bad field', () => {
    expect(() => resolveGatewayClientOptions({ baseUrl: 'http://x', ownership: {} as never })).toThrow(/ownership/);
    expect(() => resolveGatewayClientOptions({ baseUrl: 'http://x', requestTimeoutMs: -5 })).toThrow(
      /requestTimeoutMs/,
    );
  });
});
