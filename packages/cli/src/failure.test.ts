import { InvalidOptionsError } from '@kernelwarden/core';
import {
  GatewayAuthError,
  GatewayBusyError,
  GatewayCapacityError,
  GatewayDownError,
  GatewayUnavailableError,
  KernelDiedError,
  KernelStartError,
  MISSING_REPLY_ENAME,
} from '@kernelwarden/gateway-client';
import { IsolationPolicyError, IsolationUnavailableError } from '@kernelwarden/isolation';
import { createRSlot } from '@kernelwarden/r-kernel';
import { KernelFactoryError, KernelSession } from '@kernelwarden/supervisor';
import { okResult, RecordingKernel } from '@kernelwarden/testkit';
import { CellTimeoutError } from '@kernelwarden/watchdog';
import { describe, expect, it } from 'vitest';
import { ExitCode } from './exit-code.js';
import { describeFailure, resultExitCode } from './failure.js';
import { UsageError } from './usage-error.js';

function construct<T>(Kind: new (...args: any[]) => T, ...args: unknown[]): T {
  return new Kind(...args);
}

const cellTimeout = () =>
  construct(CellTimeoutError, { timeoutMs: 2000, slot: 'python', cellId: 'c', leaseId: 'l', generation: 0 });

describe('describeFailure', () => {
  it('maps each kind of error to its exit code', () => {
    const timeout = cellTimeout();
    expect(describeFailure(timeout).exitCode).toBe(ExitCode.timedOut);
    expect(describeFailure(new UsageError('bad')).exitCode).toBe(ExitCode.usage);
    expect(describeFailure(new InvalidOptionsError([{ path: 'x', message: 'bad' }])).exitCode).toBe(ExitCode.usage);
    expect(describeFailure(new IsolationPolicyError('nested')).exitCode).toBe(ExitCode.usage);
    expect(describeFailure(new IsolationUnavailableError('no bwrap', { reason: 'no-bubblewrap' })).exitCode).toBe(
      ExitCode.isolationUnavailable,
    );
    expect(describeFailure(new Error('boom')).exitCode).toBe(ExitCode.internal);
  });

  it('maps every gateway failure to 3, keeping its code', () => {
    const url = 'http://127.0.0.1:1';
    const errors = [
      new GatewayUnavailableError(`Gateway at ${url} is unreachable`, { url }),
      new GatewayAuthError(`Gateway at ${url} refused the token (403)`, { status: 403, url }),
      new KernelStartError('Failed to create kernel (HTTP 503)', { status: 503 }),
    ];
    expect(errors.map((e) => [describeFailure(e).exitCode, describeFailure(e).code])).toEqual([
      [ExitCode.gatewayUnavailable, 'GATEWAY_UNAVAILABLE'],
      [ExitCode.gatewayUnavailable, 'GATEWAY_AUTH'],
      [ExitCode.gatewayUnavailable, 'KERNEL_START'],
    ]);
  });

  it('maps a busy or full gateway at start to 3, saying the failure is temporary and may be retried', () => {
    const busy = new GatewayBusyError(
      'Kernel start on http://127.0.0.1:1 timed out after 60000 ms waiting for the gateway to create its kernel (busy starting other kernels); nothing was left running',
      { timeoutMs: 60_000, waitedMs: 60_000 },
    );
    const full = new GatewayCapacityError('Failed to create kernel "python3" on gateway http://127.0.0.1:1: HTTP 503', {
      status: 503,
      maxKernels: 4,
    });
    expect(describeFailure(busy)).toEqual({
      exitCode: ExitCode.gatewayUnavailable,
      code: 'GATEWAY_BUSY',
      message: `${busy.message}\nThis failure is temporary (the gateway is busy starting other kernels): the same command may succeed if retried later.`,
    });
    expect(describeFailure(full)).toEqual({
      exitCode: ExitCode.gatewayUnavailable,
      code: 'GATEWAY_CAPACITY',
      message: `${full.message}\nThis failure is temporary (the gateway is at its kernel limit): the same command may succeed if retried later.`,
    });
    // Through the session's kernel factory, as `kernelwarden exec` meets it.
    const wrapped = describeFailure(new KernelFactoryError('python', 'default', busy.message, busy));
    expect(wrapped.exitCode).toBe(ExitCode.gatewayUnavailable);
    expect(wrapped.message).toMatch(
      /^Failed to build the "python" kernel .*\nThis failure is temporary \(the gateway is busy/s,
    );
  });

  it('classifies a wrapped kernel-factory failure by its cause and keeps the outer message', () => {
    const cause = new IsolationUnavailableError('bwrap cannot create namespaces', { reason: 'namespaces-refused' });
    const wrapped = new KernelFactoryError('python', 'default', cause.message, cause);
    expect(describeFailure(wrapped)).toMatchObject({
      exitCode: ExitCode.isolationUnavailable,
      message: expect.stringMatching(/^Failed to build the "python" kernel .*bwrap cannot create namespaces/),
    });
    const gateway = new KernelStartError('Failed to create kernel (HTTP 503)', { status: 503 });
    expect(describeFailure(new KernelFactoryError('python', 'default', gateway.message, gateway)).exitCode).toBe(
      ExitCode.gatewayUnavailable,
    );
    expect(describeFailure(new KernelFactoryError('python', 'default', 'boom', new Error('boom'))).exitCode).toBe(
      ExitCode.internal,
    );
  });

  it('maps a limit nothing enforces to 4 with the isolation message, and points at the doctor for limits', () => {
    const unenforceable = new IsolationUnavailableError(
      'The kernel was not started: its process limit (maxProcesses) cannot be enforced here: no writable pids cgroup',
      { reason: 'limit-unenforceable', limit: 'maxProcesses' },
    );
    expect(describeFailure(unenforceable)).toEqual({
      exitCode: ExitCode.isolationUnavailable,
      code: 'ISOLATION_UNAVAILABLE',
      message:
        `${unenforceable.message}\n` +
        "Run 'kernelwarden doctor' to see which limits can be enforced here, and by what.",
    });
    // A remote gateway's refusal says it all; read isolation keeps its own pointer.
    const remote = new IsolationUnavailableError('--memory needs the embedded gateway', {
      reason: 'remote-gateway',
      limit: 'memoryBytes',
    });
    expect(describeFailure(remote).message).toBe('--memory needs the embedded gateway');
    expect(describeFailure(new IsolationUnavailableError('no bwrap', { reason: 'no-bubblewrap' })).message).toBe(
      "no bwrap\nRun 'kernelwarden doctor' to see what read isolation needs here.",
    );
  });

  it('maps a kernel that died under the cell to 5 (not 70), and a connection lost for good to 3', () => {
    const died = (reason: 'restarted' | 'dead' | 'gone' | 'connection-lost') =>
      describeFailure(new KernelDiedError(`Kernel k died (${reason})`, { reason, kernelId: 'k' }));
    expect(died('restarted')).toEqual({ exitCode: 5, code: 'KERNEL_DIED', message: 'Kernel k died (restarted)' });
    expect(ExitCode.kernelDied).toBe(5);
    expect(died('dead').exitCode).toBe(ExitCode.kernelDied);
    expect(died('gone').exitCode).toBe(ExitCode.kernelDied);
    expect(died('connection-lost').exitCode).toBe(ExitCode.gatewayUnavailable);
  });

  it('maps a gateway that went down under the cell to 6, in one line naming it and saying nothing was restarted', () => {
    const down = new GatewayDownError('Gateway http://127.0.0.1:8888 stopped answering; kernel k on it is lost', {
      url: 'http://127.0.0.1:8888',
      kernelId: 'k',
    });
    expect(ExitCode.gatewayDown).toBe(6);
    expect(describeFailure(down)).toEqual({
      exitCode: ExitCode.gatewayDown,
      code: 'GATEWAY_DOWN',
      message:
        'the gateway http://127.0.0.1:8888 went down while the cell ran (it stopped answering): its kernel is lost with its state, and no restart was attempted',
    });
    expect(Object.values(ExitCode).filter((code) => code === ExitCode.gatewayDown)).toHaveLength(1);
    // Told apart from a connection lost for good to a gateway that may still answer (3) and a dead kernel (5).
    expect(describeFailure(new KernelDiedError('lost', { reason: 'connection-lost', kernelId: 'k' })).exitCode).toBe(
      ExitCode.gatewayUnavailable,
    );
  });

  it('maps what a session rejects with when the gateway goes down under a cell to 6', async () => {
    const session = new KernelSession({
      python: () =>
        new RecordingKernel('python', {
          execute: () => {
            throw new GatewayDownError('Gateway http://127.0.0.1:9999 stopped answering', {
              url: 'http://127.0.0.1:9999',
              kernelId: 'k',
            });
          },
        }),
    });
    try {
      const failure = await session.execute('print(1)').then(
        () => undefined,
        (error: unknown) => describeFailure(error),
      );
      expect(failure?.exitCode).toBe(ExitCode.gatewayDown);
      expect(failure?.message).toContain('http://127.0.0.1:9999 went down while the cell ran');
      expect(failure?.message).not.toContain('\n');
    } finally {
      await session.close();
    }
  });

  it('shows control characters in a message escaped (it may quote a kernel or a file name)', () => {
    const { message } = describeFailure(new UsageError('cannot read \x1b]0;pwned\x07.py: no such file'));
    expect(message).toBe('cannot read \\x1b]0;pwned\\x07.py: no such file');
  });

  it('points timeouts at --timeout rather than the library option', () => {
    const timeout = cellTimeout();
    const { message } = describeFailure(timeout);
    expect(message).toMatch(/^cell exceeded 2s/);
    expect(message).toMatch(/the kernel was reset/);
    expect(message).toContain('(--timeout)');
  });
});

describe('resultExitCode', () => {
  it('exits 3 for an R kernel that could not start, told apart by its marker rather than its ename', async () => {
    const session = new KernelSession({
      python: () =>
        new RecordingKernel('python', {
          execute: (_code, opts) => {
            const error = { ename: 'RKernelUnavailable', evalue: 'a Python exception of that name', traceback: [] };
            return { ...okResult(opts.cellId), status: 'error' as const, error };
          },
        }),
      r: createRSlot({
        spawn: () => {
          throw new Error('R is missing');
        },
      }),
    });
    try {
      const unavailable = await session.execute('cat(1)', { language: 'r' });
      expect(unavailable.error?.evalue).toBe('R kernel unavailable: R is missing');
      expect(resultExitCode(unavailable, false)).toBe(ExitCode.gatewayUnavailable);
      expect(resultExitCode(await session.execute('raise'), false)).toBe(ExitCode.cellError);
    } finally {
      await session.close();
    }
  });

  it('maps the other outcomes of a cell', () => {
    const ok = okResult('c');
    expect(resultExitCode(ok, false)).toBe(ExitCode.ok);
    expect(resultExitCode({ ...ok, timedOut: true }, false)).toBe(ExitCode.timedOut);
    expect(resultExitCode({ ...ok, cancelled: true }, false)).toBe(ExitCode.interrupted);
    expect(resultExitCode(ok, true)).toBe(ExitCode.interrupted);
    const noReply = { ename: MISSING_REPLY_ENAME, evalue: 'idle without a reply', traceback: [] };
    expect(resultExitCode({ ...ok, status: 'error', error: noReply }, false)).toBe(ExitCode.internal);
  });
});
