import { type ExecuteOptions, type ExecuteResult, type Output, withDeadline } from '@kernelwarden/core';
import { type EnvironmentStep, GatewayKernel, type WebSocketClass } from '@kernelwarden/gateway-client';
import type { IsolationPolicy } from '@kernelwarden/isolation';
import { createRSlot, startIRKernel } from '@kernelwarden/r-kernel';
import { KernelSession, type SlotFactoryContext } from '@kernelwarden/supervisor';
import { createWatchdog, type Watchdog } from '@kernelwarden/watchdog';
import type { Language, StackOptions } from './command-types.js';
import type { InterpreterFacts, PythonSource } from './python-interpreter.js';
import {
  checkLimits,
  connectGateway,
  type GatewayConnection,
  removeOwnSpecs,
  type StackKernelspecs,
  stackKernelspecs,
} from './stack-gateway.js';
import {
  chooseInterpreter,
  kernelEnvironment,
  kernelPolicy,
  pythonPathCode,
  refuseUnsupported,
  stackLimits,
} from './stack-policy.js';

export { kernelEnvironment, pythonPathCode, stackLimits } from './stack-policy.js';

/** How long `Stack.close()` waits for the session to shut its kernels down. */
const CLOSE_TIMEOUT_MS = 20_000;

/** Hooks that let a front end show progress while the stack works. */
export interface StackHooks {
  /** A kernel for `language` is being started (show a spinner). */
  onKernelStarting?(language: Language): void;
  /** The start of that kernel finished, successfully or not. */
  onKernelStarted?(language: Language): void;
  /**
   * Code run silently (no output, no history) on each new kernel of a language — its first, and each one the
   * watchdog restarts — before any cell (`kernelwarden run`'s script bootstrap). It is sent ahead of the cell, which
   * does not wait for its reply (the kernel runs them in that order). A bootstrap that fails is ignored.
   */
  bootstrap?: Partial<Record<Language, string>>;
  /**
   * When a Python kernel's start waits for its cwd/env step (gateway-client's `environmentStep`): `'ahead'` sends the
   * cell behind it at once (`kernelwarden run`, whose one cell fails with the step's error if the step fails).
   * @defaultValue `'wait'`
   */
  environmentStep?: EnvironmentStep;
  /**
   * Wraps the WebSocket class of the gateway client (absent: gateway-client's own for a remote gateway): `run
   * NOTEBOOK.ipynb`'s message tap (`createMessageTap().wrap`).
   */
  wrapWebSocket?(base: WebSocketClass | undefined): WebSocketClass;
  /** Something the user should know, one line without the `kernelwarden: ` prefix (the CLI writes it to stderr). */
  onNotice?(message: string): void;
}

/** Options of one cell run through a `Stack`. */
export interface StackExecuteOptions {
  language: Language;
  cellId?: string;
  onOutput?: (output: Output) => void;
  /** Answers the cell's `input()` / `getpass()` / `readline()`; without it the kernel is told stdin is not allowed. */
  onInput?: ExecuteOptions['onInput'];
  /** Aborting lets the watchdog interrupt, then kill and restart the kernel. */
  signal?: AbortSignal;
}

/**
 * The whole kernelwarden stack, composed: a gateway (embedded or remote), a `KernelSession` whose Python slot
 * starts `GatewayKernel`s, an R slot, the watchdog as the session's executor, and read isolation.
 *
 * Get one from `createStack()`, run cells with `execute()`, and always `close()` it (or `await using`).
 */
export interface Stack extends AsyncDisposable {
  /** Where the kernels run; `embedded` is true for the LocalGateway. */
  readonly gateway: { readonly baseUrl: string; readonly embedded: boolean };
  /** The session holding the kernels. */
  readonly session: KernelSession;
  /** The watchdog that bounds every cell (subscribe with `watchdog.on('*', …)`). */
  readonly watchdog: Watchdog;
  /**
   * The policy every kernel of the stack runs under: the hidden directories of `--hide` and the limits (`--memory`,
   * `--max-processes`, `--cpu-time`, `--no-network`); undefined when neither was asked for.
   */
  readonly readIsolation: IsolationPolicy | undefined;
  /**
   * The interpreter the Python kernels run when it is not the gateway's `python3` kernelspec: `--python`,
   * `VIRTUAL_ENV` or the nearest `.venv` (`source`), with its version and ipykernel's.
   */
  readonly python: (InterpreterFacts & { source: PythonSource }) | undefined;
  /** Runs one cell under the watchdog; rejects with `CellTimeoutError` when the kernel had to be reset. */
  execute(code: string, opts: StackExecuteOptions): Promise<ExecuteResult>;
  /** Interrupts the running cell of `language`, if any; says whether an interrupt was sent. */
  interrupt(language: Language): Promise<boolean>;
  /**
   * Kills the kernel of `language` at once, without the watchdog's interrupt grace, and restarts it (its variables
   * are gone; a cell running on it settles). Resolves true once the restarted kernel is published, false when there
   * was no kernel to kill or the kill failed.
   */
  kill(language: Language): Promise<boolean>;
  /** Shuts every kernel down and releases the gateway. Idempotent; never throws. */
  close(): Promise<void>;
}

/**
 * Builds the stack for `options` (the parsed flags of `run`, `repl` or `demo`). Nothing starts a kernel yet: the
 * first `execute()` of each language does, lazily.
 *
 * Every kernel of the stack — Python, R, background cells, and each kernel the watchdog restarts (a restart relaunches
 * the same kernelspec) — runs under the same policy: `--hide`/`--allow` and the limits. The limits are checked against
 * this machine here, before any kernel starts.
 *
 * This is the reference composition: copy it when you embed kernelwarden in a server. Throws
 * `GatewayUnavailableError`/`GatewayAuthError` when the gateway cannot be used, `IsolationPolicyError` for bad
 * `--hide`/`--allow` directories, and `IsolationUnavailableError` when they or a limit cannot be enforced (a limit
 * nothing here enforces, or any of them on a remote `--gateway`).
 */
export async function createStack(
  options: StackOptions,
  extra: StackHooks & { env?: Record<string, string | undefined>; signal?: AbortSignal } = {},
): Promise<Stack> {
  const own = extra.env ?? process.env;
  const limits = stackLimits(options);
  refuseUnsupported(options, limits, own);
  const sandboxed = options.hide.length > 0 || Object.keys(limits).length > 0;
  const interpreter = chooseInterpreter(options, sandboxed, own, extra.onNotice);
  const readIsolation = kernelPolicy(options, limits);
  const gateway = await connectGateway(options, own, extra.signal, extra.wrapWebSocket);
  try {
    const limitSupport = await checkLimits(gateway, limits, extra.signal);
    const specs = stackKernelspecs(gateway, { cwd: options.cwd, interpreter, readIsolation, limitSupport });
    const env = kernelEnvironment(
      options,
      // A limits-only kernel sees this machine as its user does: it gets the environment an unlimited one would.
      { embedded: gateway.embedded, isolated: options.hide.length > 0 },
      own,
    );
    const { session, watchdog } = composeSession(options, extra, { gateway, specs, env, readIsolation });
    return stackHandle({ gateway, specs, session, watchdog, readIsolation, interpreter });
  } catch (error) {
    await gateway.release().catch(() => {});
    throw error;
  }
}

/**
 * The session of a stack: a Python slot of `GatewayKernel`s and an R slot of IRkernels on `gateway`, each started
 * from its kernelspec with the stack's cwd and environment (reported through `onKernelStarting`/`onKernelStarted`)
 * and bootstrapped (`PYTHONPATH`, the hooks' code), under the watchdog and the policy.
 */
function composeSession(
  options: StackOptions,
  extra: StackHooks,
  parts: {
    gateway: GatewayConnection;
    specs: StackKernelspecs;
    env: Record<string, string>;
    readIsolation: IsolationPolicy | undefined;
  },
): { session: KernelSession; watchdog: Watchdog } {
  const { gateway, specs, env, readIsolation } = parts;
  const starting = async <T>(language: Language, start: () => Promise<T>): Promise<T> => {
    extra.onKernelStarting?.(language);
    try {
      return await start();
    } finally {
      extra.onKernelStarted?.(language);
    }
  };
  /** What both slots' kernels start with: the gateway, the (isolated) kernelspec, cwd, env and the slot's signal. */
  const startOptions = async (language: Language, ctx: { cwd?: string; signal?: AbortSignal }) => ({
    gateway: gateway.client,
    kernelName: await specs.kernelName(language),
    cwd: ctx.cwd ?? options.cwd,
    env,
    signal: ctx.signal,
  });
  const python = (ctx: SlotFactoryContext) =>
    starting('python', async () =>
      GatewayKernel.start({
        ...(await startOptions('python', ctx)),
        ...(extra.environmentStep ? { environmentStep: extra.environmentStep } : {}),
      }),
    );
  const bootstraps: Partial<Record<Language, string>> = { ...extra.bootstrap };
  if (env.PYTHONPATH) bootstraps.python = pythonPathCode(env.PYTHONPATH) + (bootstraps.python ?? '');
  const bootstrap =
    (language: Language) =>
    async (lease: { kernel: { execute?(code: string, opts?: ExecuteOptions): Promise<ExecuteResult> } }) => {
      const code = bootstraps[language];
      if (code === undefined || !lease.kernel.execute) return;
      // Sent, not waited for: a kernel runs its shell requests one after the other, in the order they came, so the
      // bootstrap runs before the cell sent next, and the cell does not wait a round trip for the bootstrap's reply.
      // Its failure leaves the kernel as it was: the script runs, only without what the bootstrap adds.
      void lease.kernel.execute(code, { silent: true, storeHistory: false }).catch(() => {});
    };
  const r = createRSlot({
    spawn: (ctx) => starting('r', async () => startIRKernel(await startOptions('r', ctx))),
    ...(bootstraps.r === undefined ? {} : { bootstrap: bootstrap('r') }),
  });
  const watchdog = createWatchdog({
    ...(options.timeoutMs === undefined ? {} : { cellTimeoutMs: options.timeoutMs }),
    ...(options.interruptGraceMs === undefined ? {} : { interruptGraceMs: options.interruptGraceMs }),
    ...(options.killGraceMs === undefined ? {} : { killGraceMs: options.killGraceMs }),
  });
  const session = new KernelSession({
    python,
    r,
    executor: watchdog,
    cwd: options.cwd,
    ...(readIsolation ? { readIsolation } : {}),
    ...(bootstraps.python === undefined ? {} : { bootstrap: bootstrap('python') }),
  });
  return { session, watchdog };
}

/**
 * Kills the kernel of `language` at once and publishes its restart: true once the restarted kernel is published,
 * false when there was no kernel to kill or the kill failed.
 */
async function killAndRestart(session: KernelSession, language: Language): Promise<boolean> {
  const supervisor = session.supervisor;
  const lease = supervisor.lease(language);
  if (!lease || typeof lease.kernel.kill !== 'function') return false;
  let restarted: boolean;
  try {
    restarted = (await lease.kernel.kill())?.restarted === true;
  } catch {
    return false;
  }
  // A gateway kernel's kill is a server-side restart: only the next generation is published then.
  try {
    return (await supervisor.restartIfCurrent(lease, restarted ? { alreadyRestarted: true } : {})) !== undefined;
  } catch {
    return false;
  }
}

/** The `Stack` over a composed session; its `close()` shuts the kernels down, removes its kernelspecs, releases. */
function stackHandle(parts: {
  gateway: GatewayConnection;
  specs: StackKernelspecs;
  session: KernelSession;
  watchdog: Watchdog;
  readIsolation: IsolationPolicy | undefined;
  interpreter: (InterpreterFacts & { source: PythonSource }) | undefined;
}): Stack {
  const { gateway, specs, session } = parts;
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      try {
        // Bounded: a kernel stuck mid-restart must not keep a command from exiting. Whatever is left is
        // reaped by the embedded gateway (it deletes kernels whose creating process is gone).
        await withDeadline(() => session.close(), { timeoutMs: CLOSE_TIMEOUT_MS });
      } catch {
        // close() reports nothing useful to a CLI that is exiting; the gateway lease below still goes.
      }
      await removeOwnSpecs(gateway, specs.installed);
      await gateway.release().catch(() => {});
    })());
  return {
    gateway: { baseUrl: gateway.client.baseUrl, embedded: gateway.embedded },
    session,
    watchdog: parts.watchdog,
    readIsolation: parts.readIsolation,
    python: parts.interpreter,
    execute: (code, opts) =>
      session.execute(code, {
        language: opts.language,
        origin: 'cli',
        ...(opts.cellId === undefined ? {} : { cellId: opts.cellId }),
        ...(opts.onOutput ? { onOutput: opts.onOutput } : {}),
        ...(opts.onInput ? { onInput: opts.onInput } : {}),
        ...(opts.signal ? { signal: opts.signal } : {}),
      }),
    // Each language's kernel lives in the supervisor slot of that language's name.
    interrupt: async (language) => (await session.supervisor.interrupt(language)) > 0,
    kill: (language) => killAndRestart(session, language),
    close,
    [Symbol.asyncDispose]: close,
  };
}
