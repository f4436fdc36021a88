import { BootstrapError } from './errors.js';
import { isAlive, type Lease, type SupervisedKernel } from './lease.js';
import { PYTHON_SLOT, type ResolvedSessionOptions, type SlotFactoryContext } from './session-options.js';
import type { KernelStatus } from './session-status.js';
import type { KernelSupervisor } from './supervisor.js';

/** What the Python slot needs of its session. */
export interface PythonSlotHost<K extends SupervisedKernel, H> {
  readonly supervisor: KernelSupervisor<K>;
  readonly options: ResolvedSessionOptions<K, H>;
  /** The session's host state (made on first use). */
  host(): H;
  /** Emits a `kernel_status` event for the Python slot. */
  emit(status: KernelStatus): void;
}

/**
 * A session's Python slot: its environments (active and desired), building and bootstrapping its kernels, the
 * build-first environment switch, restart, its spares and its background kernels' factory. Every method runs
 * inside the session's turn, except `backgroundKernel` and `configureSpares`.
 *
 * Internal to `KernelSession`.
 */
export class PythonSlot<K extends SupervisedKernel, H> {
  readonly #session: PythonSlotHost<K, H>;
  readonly #supervisor: KernelSupervisor<K>;
  readonly #options: ResolvedSessionOptions<K, H>;
  /** The environment asked for last. */
  desiredEnv: string | undefined;
  /** The environment of the current (or next) kernel. */
  activeEnv: string | undefined;

  constructor(session: PythonSlotHost<K, H>) {
    this.#session = session;
    this.#supervisor = session.supervisor;
    this.#options = session.options;
    this.desiredEnv = session.options.env;
    this.activeEnv = session.options.env;
  }

  /**
   * Makes sure the Python slot holds a live kernel: the live one whatever its environment, else one for `env`
   * (default: the desired environment). A new kernel is bootstrapped here, outside every lock: before it is
   * published when it replaces a live kernel (a switch: the old one serves until the new one is ready), after it
   * is published otherwise (so `interrupt('python')` reaches a blocked bootstrap).
   */
  async ensure(signal: AbortSignal, emit: KernelStatus | null, switchTo?: string): Promise<Lease<K>> {
    const current = this.#supervisor.lease(PYTHON_SLOT);
    const live = current !== undefined && isAlive(current.kernel);
    const env = switchTo ?? (live ? envFromKey(current.key) : this.desiredEnv);
    const key = envKey(env);
    let prepared = false;
    const prepare =
      live && current.key !== key && this.#options.bootstrap
        ? async (kernel: K, ctx: { signal: AbortSignal }) => {
            await this.#bootstrapProvisional(kernel, key, ctx.signal);
            prepared = true;
          }
        : undefined;
    const result = await this.#supervisor.acquire(
      PYTHON_SLOT,
      key,
      (ctx) => this.#options.python(this.#context('main', env, ctx.signal)),
      prepare ? { signal, prepare } : { signal },
    );
    if (result.outcome === 'reused') return result.lease;
    const envChanged = this.activeEnv !== env;
    this.activeEnv = env;
    if (envChanged) this.configureSpares();
    if (result.outcome === 'built' && !prepared) await this.bootstrap(result.lease, signal);
    if (emit) this.#session.emit(emit);
    return result.lease;
  }

  /**
   * Switches to environment `name`: with a live kernel in another environment, builds and bootstraps the
   * replacement first (the old kernel serves until then); without one, only records the choice.
   */
  async switchEnv(name: string, signal: AbortSignal): Promise<void> {
    this.desiredEnv = name;
    const current = this.#supervisor.lease(PYTHON_SLOT);
    if (current && isAlive(current.kernel)) {
      if (this.activeEnv !== name || current.key !== envKey(name)) await this.ensure(signal, null, name);
    } else if (this.activeEnv !== name) {
      this.activeEnv = name;
      this.configureSpares();
    }
  }

  /** Restarts the live kernel in place and re-bootstraps it, or starts one (emitting `restarted`). */
  async restart(signal: AbortSignal): Promise<void> {
    const current = this.#supervisor.lease(PYTHON_SLOT);
    const restarted =
      current && isAlive(current.kernel) ? await this.#supervisor.restartIfCurrent(current, { signal }) : undefined;
    if (restarted) await this.bootstrap(restarted, signal);
    else {
      await this.ensure(signal, null);
      this.#session.emit('restarted');
    }
  }

  /** Runs the session's bootstrap on a published lease; a failure shuts that lease down (`bootstrap_failed`). */
  async bootstrap(lease: Lease<K>, signal: AbortSignal): Promise<void> {
    const bootstrap = this.#options.bootstrap;
    if (!bootstrap) return;
    try {
      await bootstrap(lease, { signal, host: this.#session.host(), purpose: 'main' });
    } catch (error) {
      await this.#supervisor.shutdownIfCurrent(lease, 'bootstrap_failed');
      if (signal.aborted && error === signal.reason) throw error;
      throw new BootstrapError(lease.slot, error);
    }
  }

  /** Builds a background cell's own kernel, in the active environment. */
  backgroundKernel(): (signal: AbortSignal) => Promise<K> {
    const env = this.activeEnv;
    return async (signal) => await this.#options.python(this.#context('background', env, signal));
  }

  /** Points the session's spares (if it keeps any) at the active environment. */
  configureSpares(): void {
    const size = this.#options.sparesSize;
    if (size <= 0 || this.#supervisor.closed) return;
    const env = this.activeEnv;
    const key = envKey(env);
    void this.#supervisor.drainSpares(PYTHON_SLOT);
    this.#supervisor.configureSpares(
      PYTHON_SLOT,
      key,
      (ctx) => this.#options.python(this.#context('spare', env, ctx.signal)),
      {
        size,
        prepare: async (kernel, ctx) => {
          const bootstrap = this.#options.bootstrap;
          if (!bootstrap) return;
          const lease = provisionalLease(kernel, key, 'spare');
          await bootstrap(lease, { signal: ctx.signal, host: this.#session.host(), purpose: 'spare' });
        },
      },
    );
  }

  /** Bootstraps a kernel that is not published yet (a switch's replacement), on a provisional lease. */
  async #bootstrapProvisional(kernel: K, key: string, signal: AbortSignal): Promise<void> {
    try {
      await this.#options.bootstrap?.(provisionalLease(kernel, key, 'provisional'), {
        signal,
        host: this.#session.host(),
        purpose: 'main',
      });
    } catch (error) {
      if (signal.aborted && error === signal.reason) throw error;
      throw new BootstrapError(PYTHON_SLOT, error);
    }
  }

  #context(
    purpose: SlotFactoryContext['purpose'],
    env: string | undefined,
    signal: AbortSignal,
  ): SlotFactoryContext<H> {
    const ctx: SlotFactoryContext<H> = { slot: PYTHON_SLOT, env, purpose, signal, host: this.#session.host() };
    const { cwd, readIsolation } = this.#options;
    if (cwd !== undefined) ctx.cwd = cwd;
    if (readIsolation !== undefined) ctx.readIsolation = readIsolation;
    return ctx;
  }
}

/** A lease for a kernel that is not published: `generation: -1`, so exact-lease operations on it do nothing. */
function provisionalLease<K extends SupervisedKernel>(kernel: K, key: string, prefix: string): Lease<K> {
  return { slot: PYTHON_SLOT, key, generation: -1, id: `${prefix}-${globalThis.crypto.randomUUID()}`, kernel };
}

/** The supervisor key of a Python environment: its name, or `''` for the factory's default. */
function envKey(env: string | undefined): string {
  return env ?? '';
}

function envFromKey(key: string): string | undefined {
  return key === '' ? undefined : key;
}
