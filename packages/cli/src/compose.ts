import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { type ExecuteOptions, type ExecuteResult, type Output, withDeadline } from '@kernelwarden/core';
import { GatewayClient, GatewayKernel, type WebSocketClass } from '@kernelwarden/gateway-client';
import type { IsolationPolicy, KernelLimits, LimitFacts, LimitName } from '@kernelwarden/isolation';
import { LocalGateway, type LocalGatewayPool } from '@kernelwarden/local-gateway';
import { createRSlot, startIRKernel } from '@kernelwarden/r-kernel';
import { KernelSession, type SlotFactoryContext } from '@kernelwarden/supervisor';
import { createWatchdog, type Watchdog } from '@kernelwarden/watchdog';
import type { Language, StackOptions } from './args.js';
import { containedWorkspacesPath, readContainedWorkspaces, recordContainedWorkspace } from './contained-workspaces.js';
import { isolation } from './isolation.js';
import { LIMIT_FLAG_NAMES } from './limit-flags.js';
import { absolutePathEntries } from './path-entries.js';
import {
  checkInterpreter,
  choosePython,
  type InterpreterFacts,
  installInterpreterSpec,
  type PythonSource,
  passedOverNotice,
} from './python-interpreter.js';
import { UsageError } from './usage-error.js';

/** How long `Stack.close()` waits for the session to shut its kernels down. */
const CLOSE_TIMEOUT_MS = 20_000;

/** Deadline of the kernel listing that decides which isolated kernelspecs are still in use. */
const LISTING_TIMEOUT_MS = 5000;

/** The kernelspec each language starts from on the gateway. */
const BASE_KERNELSPEC: Record<Language, string> = { python: 'python3', r: 'ir' };

/** Hooks that let a front end show progress while the stack works. */
export interface StackHooks {
  /** A kernel for `language` is being started (show a spinner). */
  onKernelStarting?(language: Language): void;
  /** The start of that kernel finished, successfully or not. */
  onKernelStarted?(language: Language): void;
  /**
   * Code run silently (no output, no history) on each new kernel of a language — its first, and each one the
   * watchdog restarts — before any cell (`kernelwarden run`'s script bootstrap). A bootstrap that fails is ignored.
   */
  bootstrap?: Partial<Record<Language, string>>;
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

interface GatewayConnection {
  client: GatewayClient;
  kernelSpecDir: string | undefined;
  /** The embedded server's pid: kernels' cgroups are made in its cgroups, so limits are detected for it. */
  pid: number | undefined;
  embedded: boolean;
  /** The embedded gateway's warm pool (absent for a remote gateway). */
  pool?: LocalGatewayPool;
  release(): Promise<void>;
}

async function connectGateway(
  options: StackOptions,
  env: Record<string, string | undefined>,
  signal: AbortSignal | undefined,
  wrapWebSocket: StackHooks['wrapWebSocket'],
): Promise<GatewayConnection> {
  if (options.gatewayUrl !== undefined) {
    const token = env[options.tokenEnv] || undefined;
    const client = new GatewayClient({
      baseUrl: options.gatewayUrl,
      ...(token ? { token } : {}),
      ...(wrapWebSocket ? { WebSocket: wrapWebSocket(undefined) } : {}),
    });
    // Fail fast with the gateway's own error (unreachable, wrong token) before any kernel is asked for.
    await client.kernelSpecs(signal ? { signal } : {});
    return { client, kernelSpecDir: undefined, pid: undefined, embedded: false, release: async () => {} };
  }
  // LocalGateway's server signals a kernel that ignores its shutdown request after 1 s (not jupyter's 5 s), so the
  // watchdog's kills stay quick without arguments of ours.
  const lease = await LocalGateway.acquire(signal ? { signal } : {});
  // With a memory limit, a kernel's cgroups tell an out-of-memory death from any other (KernelDiedError 'oom').
  const diagnostics =
    options.memoryBytes === undefined
      ? lease.diagnostics
      : { ...lease.diagnostics, limitEvents: (id: string) => isolation().kernelLimitEvents(id, { pid: lease.pid }) };
  const client = new GatewayClient({
    baseUrl: lease.baseUrl,
    token: lease.token,
    ownership: lease.ownership,
    diagnostics,
    // The warm pool: a python3 kernel is claimed instead of started; a kill of a hung kernel is immediate.
    pool: lease.pool,
    processes: lease.processes,
    fetch: lease.fetch,
    request: lease.request,
    WebSocket: wrapWebSocket ? wrapWebSocket(lease.WebSocket) : lease.WebSocket,
  });
  return {
    client,
    kernelSpecDir: lease.kernelSpecDir,
    pid: lease.pid,
    embedded: true,
    pool: lease.pool,
    release: () => lease.release(),
  };
}

/**
 * Variables never handed to a kernel: a gateway's credentials, and the marker the embedded gateway gives its own
 * kernels' processes (this command may itself run inside a kernel).
 */
const WITHHELD_VARIABLES = [
  'KERNELWARDEN_GATEWAY_TOKEN',
  'JUPYTER_TOKEN',
  'JPY_API_TOKEN',
  'JUPYTERHUB_API_TOKEN',
  'KERNELWARDEN_KERNEL',
];
/** Names a kernel's environment code can set in Python and R alike (exported shell functions are not). */
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The variables a kernel of this command gets. An unisolated kernel on the embedded gateway: this process's own
 * environment (as if the code ran here), without any gateway credential, then `--env`. An isolated kernel (`--hide`)
 * and a remote gateway's kernel: only `--env` — an isolated kernel runs code that is kept from reading what is
 * hidden, and credentials in the environment would hand it what the policy hides on disk; a remote gateway gets
 * nothing of this machine's environment. A kernel under limits only (no `--hide`) counts as unisolated: limits change
 * what it may use, not what it may see. Either way the kernel also has the embedded server's few inherited
 * variables (PATH, HOME, locale…), never those of whoever started the server. Its `PATH`, wherever it comes from
 * (this process, `--env`), keeps only absolute entries (`absolutePathEntries`).
 */
export function kernelEnvironment(
  options: Pick<StackOptions, 'env' | 'tokenEnv'>,
  where: { embedded: boolean; isolated: boolean },
  own: Record<string, string | undefined>,
): Record<string, string> {
  const env: Record<string, string> = {};
  if (where.embedded && !where.isolated) {
    const withheld = new Set([...WITHHELD_VARIABLES, options.tokenEnv]);
    for (const [name, value] of Object.entries(own)) {
      if (value !== undefined && VARIABLE_NAME.test(name) && !withheld.has(name)) env[name] = value;
    }
  }
  const out: Record<string, string> = { ...env, ...options.env };
  if (out.PATH !== undefined) out.PATH = absolutePathEntries(out.PATH);
  return out;
}

/**
 * Code that puts `PYTHONPATH`'s directories on the kernel's `sys.path`, where Python puts them at start-up (first,
 * after the script's own directory entry), skipping those already there. A kernel's variables are applied once it
 * runs, after the interpreter has read `PYTHONPATH`; this makes the variable take effect all the same.
 */
export function pythonPathCode(pythonPath: string): string {
  const dirs = pythonPath.split(':').filter((dir) => dir !== '');
  return `def __kernelwarden_pythonpath(dirs):
    import sys
    at = 1 if sys.path and sys.path[0] == '' else 0
    for d in [d for d in dirs if d not in sys.path]:
        sys.path.insert(at, d)
        at += 1
__kernelwarden_pythonpath(${JSON.stringify(dirs)})
del __kernelwarden_pythonpath
`;
}

/**
 * Refuses a `PYTHONPATH` of this command's that its kernels would not get (an isolated kernel and a remote gateway's
 * get only `--env`): it is given on, or refused with the reason, never dropped silently.
 */
function checkPythonPath(options: StackOptions, own: Record<string, string | undefined>): void {
  if (!own.PYTHONPATH || options.env.PYTHONPATH !== undefined) return;
  if (options.gatewayUrl === undefined && options.hide.length === 0) return;
  const who =
    options.gatewayUrl !== undefined
      ? `a remote gateway's kernel (${options.gatewayUrl}) gets only --env variables`
      : 'a kernel under --hide gets only --env variables';
  throw new UsageError(
    `PYTHONPATH is set here, but ${who}: pass --env PYTHONPATH=… to give it to the kernel${
      options.gatewayUrl !== undefined ? " (directories on the gateway's machine)" : ''
    }, or unset it`,
  );
}

/** The limits `options` ask for (`--memory`, `--max-processes`, `--cpu-time`, `--no-network`), absent ones left out. */
export function stackLimits(
  options: Pick<StackOptions, 'memoryBytes' | 'maxProcesses' | 'cpuSeconds' | 'network'>,
): KernelLimits {
  return {
    ...(options.memoryBytes === undefined ? {} : { memoryBytes: options.memoryBytes }),
    ...(options.maxProcesses === undefined ? {} : { maxProcesses: options.maxProcesses }),
    ...(options.cpuSeconds === undefined ? {} : { cpuSeconds: options.cpuSeconds }),
    ...(options.network === false ? { network: false } : {}),
  };
}

/**
 * The policy of every kernel of the stack: `--hide`/`--allow` with the limits (a read-isolation policy), the limits
 * alone (a limits-only policy: the kernel sees the filesystem as its user does), or none.
 */
function kernelPolicy(options: StackOptions, limits: KernelLimits): IsolationPolicy | undefined {
  if (options.hide.length === 0)
    return Object.keys(limits).length > 0 ? isolation().createKernelPolicy(limits) : undefined;
  const policy = isolation().createReadIsolationPolicy({
    roots: options.hide.map((dir) => ({ path: resolve(options.cwd, dir), label: `--hide ${dir}` })),
    allowedRoots: options.allow.map((dir) => ({ path: resolve(options.cwd, dir), label: `--allow ${dir}` })),
    ...limits,
  });
  checkWorkspaceNotTemp(options.cwd, policy);
  return policy;
}

/**
 * What this machine can enforce for the kernels of `gateway`, checked against `limits` before any kernel starts:
 * `IsolationUnavailableError` (reason `limit-unenforceable`, the isolation package's message naming the limit and
 * why) for the first limit nothing here enforces. The answer is handed to every kernelspec install of the stack, so
 * the machine is looked at once.
 */
async function checkLimits(
  gateway: GatewayConnection,
  limits: KernelLimits,
  signal: AbortSignal | undefined,
): Promise<LimitFacts | undefined> {
  if (Object.keys(limits).length === 0) return undefined;
  const support = await isolation().detectLimits({
    ...(gateway.pid === undefined ? {} : { pid: gateway.pid }),
    signal,
  });
  isolation().planLimits(limits, support);
  return support;
}

/** `--memory, --no-network need…`: the limit flags given, for a refusal that names them. */
function limitFlagList(limits: KernelLimits): { flags: string; first: LimitName } {
  const names = Object.keys(limits) as LimitName[];
  return { flags: names.map((name) => LIMIT_FLAG_NAMES[name]).join(', '), first: names[0]! };
}

/**
 * The kernel's workspace is its working directory, bound into a private, empty temporary directory: a working
 * directory below the system temporary directory works, but the system temporary directory itself cannot be both.
 * Refused here, before any gateway or kernel starts, with what to do.
 */
function checkWorkspaceNotTemp(cwd: string, policy: IsolationPolicy): void {
  let workspace: string;
  try {
    workspace = realpathSync.native(resolve(cwd));
  } catch {
    return; // a missing directory is reported where it is used
  }
  const temps = new Set([policy.tempDir, '/tmp']);
  try {
    temps.add(realpathSync.native('/tmp'));
  } catch {
    // no /tmp
  }
  if (temps.has(workspace)) {
    throw new UsageError(
      `--hide: the working directory ${workspace} is the system temporary directory, and every isolated kernel ` +
        "gets a private, empty one of its own, so it cannot be the kernel's workspace too: run from a directory " +
        `of its own (mkdir ${resolve(workspace, 'work')} && cd ${resolve(workspace, 'work')}) or pass --cwd DIR`,
    );
  }
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
  if (options.gatewayUrl !== undefined && options.hide.length > 0) {
    // Checked before anything else: no policy and no layout can make a remote server's kernels isolated.
    throw new (isolation().IsolationUnavailableError)(
      `--hide needs the embedded gateway: a remote gateway (${options.gatewayUrl}) launches kernels we cannot sandbox`,
      { reason: 'remote-gateway' },
    );
  }
  const limits = stackLimits(options);
  if (options.gatewayUrl !== undefined && Object.keys(limits).length > 0) {
    const { flags, first } = limitFlagList(limits);
    throw new (isolation().IsolationUnavailableError)(
      `${flags} need${flags.includes(',') ? '' : 's'} the embedded gateway: a remote gateway (${options.gatewayUrl}) ` +
        'launches kernels whose limits nothing here can enforce, so none is started',
      { reason: 'remote-gateway', limit: first },
    );
  }
  checkPythonPath(options, extra.env ?? process.env);
  if (options.python !== undefined && options.gatewayUrl !== undefined) {
    throw new UsageError(
      `--python needs the embedded gateway: a remote gateway (${options.gatewayUrl}) runs kernels on its own interpreters`,
    );
  }
  // The interpreter the user means (--python, VIRTUAL_ENV, a .venv), checked at once: without ipykernel it is
  // refused with the command that installs it, before any gateway or kernel starts.
  const sandboxed = options.hide.length > 0 || Object.keys(limits).length > 0;
  let choice: ReturnType<typeof choosePython>;
  if (options.gatewayUrl === undefined) {
    // Every workspace a contained kernel gets is recorded before it starts; a .venv found in one (the kernel could
    // have written it) is never chosen automatically — not by this command either.
    const record = containedWorkspacesPath(extra.env ?? process.env);
    if (sandboxed) recordContainedWorkspace(record, options.cwd);
    choice = choosePython({
      flag: options.python,
      env: extra.env ?? process.env,
      cwd: options.cwd,
      untrusted: readContainedWorkspaces(record),
      onPassedOver: (venv, workspace) => extra.onNotice?.(passedOverNotice(venv, workspace, options.cwd)),
    });
  }
  // Sandboxed kernels (--hide, a limit): the interpreter is never run outside the sandbox, only looked at.
  const interpreter = choice ? { ...checkInterpreter(choice, { run: !sandboxed }), source: choice.source } : undefined;
  const readIsolation = kernelPolicy(options, limits);
  const gateway = await connectGateway(options, extra.env ?? process.env, extra.signal, extra.wrapWebSocket);
  try {
    const limitSupport = await checkLimits(gateway, limits, extra.signal);
    const baseSpecs: Record<Language, string> = { ...BASE_KERNELSPEC };
    if (interpreter) {
      if (gateway.kernelSpecDir === undefined) {
        throw new UsageError('--python needs the embedded gateway: this gateway has no kernelspec directory');
      }
      baseSpecs.python = installInterpreterSpec(gateway.kernelSpecDir, interpreter.path);
    }
    const kernelNames = new Map<Language, Promise<string>>();
    // The isolated kernelspecs this command installed: removed when it closes, unless a kernel still runs on one.
    const installed = new Set<string>();
    let swept: Promise<void> | undefined;
    const kernelName = (language: Language): Promise<string> => {
      let name = kernelNames.get(language);
      if (!name) {
        name = readIsolation
          ? (async () => {
              // Before the first install: the specs left by commands that were killed before they could clean up.
              await (swept ??= sweepOrphanSpecs(gateway));
              // Pooled like its base kernelspec, the spec is the server's: the next command with the same policy
              // claims a started kernel of it. Otherwise it is this command's, removed when it closes.
              const base = baseSpecs[language];
              const pooled = gateway.pid !== undefined && (gateway.pool?.size(base) ?? 0) > 0;
              const isolated = await isolatedKernelName(
                gateway,
                base,
                readIsolation,
                options.cwd,
                limitSupport,
                pooled,
              );
              if (pooled) gateway.pool?.keep(isolated, base);
              else installed.add(isolated);
              return isolated;
            })()
          : Promise.resolve(baseSpecs[language]);
        kernelNames.set(language, name);
        // A failed install may succeed later (e.g. after the user fixes bwrap): do not cache the failure.
        name.catch(() => kernelNames.delete(language));
      }
      return name;
    };
    const starting = async <T>(language: Language, start: () => Promise<T>): Promise<T> => {
      extra.onKernelStarting?.(language);
      try {
        return await start();
      } finally {
        extra.onKernelStarted?.(language);
      }
    };

    const env = kernelEnvironment(
      options,
      // A limits-only kernel sees this machine as its user does: it gets the environment an unlimited one would.
      { embedded: gateway.embedded, isolated: options.hide.length > 0 },
      extra.env ?? process.env,
    );
    /** What both slots' kernels start with: the gateway, the (isolated) kernelspec, cwd, env and the slot's signal. */
    const startOptions = async (language: Language, ctx: { cwd?: string; signal?: AbortSignal }) => ({
      gateway: gateway.client,
      kernelName: await kernelName(language),
      cwd: ctx.cwd ?? options.cwd,
      env,
      signal: ctx.signal,
    });
    const python = (ctx: SlotFactoryContext) =>
      starting('python', async () => GatewayKernel.start(await startOptions('python', ctx)));
    const bootstraps: Partial<Record<Language, string>> = { ...extra.bootstrap };
    if (env.PYTHONPATH) bootstraps.python = pythonPathCode(env.PYTHONPATH) + (bootstraps.python ?? '');
    const bootstrap =
      (language: Language) =>
      async (lease: { kernel: { execute?(code: string, opts?: ExecuteOptions): Promise<ExecuteResult> } }) => {
        const code = bootstraps[language];
        if (code === undefined || !lease.kernel.execute) return;
        // Its failure leaves the kernel as it was: the script runs, only without what the bootstrap adds.
        await lease.kernel.execute(code, { silent: true, storeHistory: false }).catch(() => {});
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
        await removeOwnSpecs(gateway, installed);
        await gateway.release().catch(() => {});
      })());

    return {
      gateway: { baseUrl: gateway.client.baseUrl, embedded: gateway.embedded },
      session,
      watchdog,
      readIsolation,
      python: interpreter,
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
      kill: async (language) => {
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
      },
      close,
      [Symbol.asyncDispose]: close,
    };
  } catch (error) {
    await gateway.release().catch(() => {});
    throw error;
  }
}

async function isolatedKernelName(
  gateway: GatewayConnection,
  baseName: string,
  policy: IsolationPolicy,
  workspace: string,
  limitSupport: LimitFacts | undefined,
  pooled: boolean,
): Promise<string> {
  if (gateway.kernelSpecDir === undefined) {
    throw new (isolation().IsolationUnavailableError)(
      '--hide needs the embedded gateway: this gateway has no kernelspec directory',
      {
        reason: 'remote-gateway',
      },
    );
  }
  const specs = await gateway.client.kernelSpecs();
  const base = specs.kernelspecs[baseName];
  if (!base) {
    throw new (isolation().IsolationUnavailableError)(`the gateway has no ${baseName} kernelspec to isolate`, {
      reason: 'probe-failed',
    });
  }
  return isolation().installIsolatedKernelSpec({
    kernelSpecDir: gateway.kernelSpecDir,
    baseSpec: {
      name: base.name,
      argv: base.spec.argv,
      display_name: base.spec.display_name,
      language: base.spec.language,
      ...(base.spec.env ? { env: base.spec.env } : {}),
    },
    policy,
    workspace: resolve(workspace),
    // Kernels' cgroups are made in the server's cgroups: the limits are planned for that process.
    ...(gateway.pid === undefined ? {} : { gatewayPid: gateway.pid }),
    // A pooled spec lives as long as the server (swept once it is gone), shared by its processes.
    ...(pooled ? { ownerPid: gateway.pid } : {}),
    ...(limitSupport ? { limitSupport } : {}),
  });
}

/** The kernelspec names the gateway's kernels run on, or undefined when it cannot tell. */
async function specsInUse(gateway: GatewayConnection): Promise<string[] | undefined> {
  try {
    const kernels = await gateway.client.listKernels({ timeoutMs: LISTING_TIMEOUT_MS });
    return kernels.map((k) => k.name);
  } catch {
    return undefined;
  }
}

/**
 * Removes the isolated kernelspecs of commands that are gone and whose kernels are gone too (LocalGateway's acquire
 * has just deleted the kernels of dead processes). Never throws: a spec left now is swept by a later command.
 */
async function sweepOrphanSpecs(gateway: GatewayConnection): Promise<void> {
  if (gateway.kernelSpecDir === undefined) return;
  const inUse = await specsInUse(gateway);
  if (!inUse) return;
  try {
    isolation().sweepIsolatedKernelSpecs({ kernelSpecDir: gateway.kernelSpecDir, inUse });
  } catch {
    // best effort
  }
}

/**
 * Removes the isolated kernelspecs this command installed, once its kernels are shut down, except one a kernel the
 * gateway still lists runs on (a shutdown that did not complete); that one is swept by a later command once its
 * kernel is gone. Never throws.
 */
async function removeOwnSpecs(gateway: GatewayConnection, installed: ReadonlySet<string>): Promise<void> {
  if (gateway.kernelSpecDir === undefined || installed.size === 0) return;
  const inUse = await specsInUse(gateway);
  if (!inUse) return;
  try {
    isolation().removeIsolatedKernelSpecs({ kernelSpecDir: gateway.kernelSpecDir, names: installed, inUse });
  } catch {
    // best effort
  }
}
