import { KernelwardenError } from '@kernelwarden/core';
import type { LimitName } from './limits.js';

/**
 * A read-isolation policy is unsafe or impossible to compute: a root that is or passes through a symbolic link,
 * two hidden roots that nest, a hidden root that overlaps the system temporary directory, a missing directory.
 *
 * Thrown synchronously by `createReadIsolationPolicy()` and `teamReadPolicy()`; never retryable (fix the layout).
 */
export class IsolationPolicyError extends KernelwardenError {
  static override readonly brand: string = 'IsolationPolicyError';
  /** The path the policy refused. */
  readonly path: string | undefined;

  constructor(message: string, options: { path?: string; cause?: unknown } = {}) {
    super(message, { code: 'ISOLATION_POLICY', cause: options.cause });
    this.path = options.path;
  }
}

/** Why a policy cannot be enforced here. */
export type IsolationUnavailableReason =
  /** Not Linux: bubblewrap is the only backend. */
  | 'unsupported-platform'
  /** No `bwrap` executable on the search path. */
  | 'no-bubblewrap'
  /** `bwrap` exists but could not create its namespaces (user namespaces disabled, seccomp, container limits). */
  | 'namespaces-refused'
  /** GNU `env` with `--ignore-signal`/`--default-signal` is missing: interrupts could not reach the kernel. */
  | 'no-signal-control'
  /** No `stat` (coreutils): an isolated kernel's launcher could not check the policy's directories. */
  | 'no-coreutils'
  /** The gateway is remote (it has no local kernelspec directory): nothing here can wrap its kernels. */
  | 'remote-gateway'
  /** The base kernelspec could not be read from the gateway (`prepareIsolatedKernel()`). */
  | 'base-kernelspec-unavailable'
  /** The self-test probe ran under the policy and could read what it must not, or not read what it must. */
  | 'probe-failed'
  /** A limit of the policy (`limit` names it) that nothing on this machine can enforce. */
  | 'limit-unenforceable';

/**
 * A policy (read isolation or a limit) cannot be enforced, so the kernel is not started (never started without it).
 * `reason` says why, `limit` which limit when it is one; the message says what to do.
 *
 * Thrown by `installIsolatedKernelSpec()`, `verifyIsolation()`, `assertSandbox()` and `wrapCommand()`.
 */
export class IsolationUnavailableError extends KernelwardenError {
  static override readonly brand: string = 'IsolationUnavailableError';
  /** Why the policy cannot be enforced. */
  readonly reason: IsolationUnavailableReason;
  /** The limit that cannot be enforced (reason `limit-unenforceable`). */
  readonly limit: LimitName | undefined;

  constructor(message: string, options: { reason: IsolationUnavailableReason; limit?: LimitName; cause?: unknown }) {
    super(message, { code: 'ISOLATION_UNAVAILABLE', cause: options.cause });
    this.reason = options.reason;
    this.limit = options.limit;
  }
}
