import { resolve } from 'node:path';
import { GatewayClient, type WebSocketClass } from '@kernelwarden/gateway-client';
import type { IsolationPolicy, KernelLimits, LimitFacts } from '@kernelwarden/isolation';
import { LocalGateway, type LocalGatewayPool } from '@kernelwarden/local-gateway';
import type { Language, StackOptions } from './command-types.js';
import { isolation } from './isolation.js';
import type { InterpreterFacts } from './python-interpreter.js';
import { installInterpreterSpec } from './python-interpreter.js';
import { UsageError } from './usage-error.js';

// The gateway of a stack (embedded or remote) and the kernelspecs its kernels start from: the base ones, an
// interpreter's own, and the isolated ones a policy needs, installed on first use and removed at the end.

/** Deadline of the kernel listing that decides which isolated kernelspecs are still in use. */
const LISTING_TIMEOUT_MS = 5000;

/** The kernelspec each language starts from on the gateway. */
const BASE_KERNELSPEC: Record<Language, string> = { python: 'python3', r: 'ir' };

/** The gateway a stack runs its kernels on. */
export interface GatewayConnection {
  client: GatewayClient;
  kernelSpecDir: string | undefined;
  /** The embedded server's pid: kernels' cgroups are made in its cgroups, so limits are detected for it. */
  pid: number | undefined;
  embedded: boolean;
  /** The embedded gateway's warm pool (absent for a remote gateway). */
  pool?: LocalGatewayPool;
  release(): Promise<void>;
}

/**
 * Connects to the gateway of `options`: a remote one (`--gateway`, its token from `--token-env`), checked at once so
 * an unreachable one or a wrong token fails before any kernel is asked for; else a ticket on the embedded one.
 */
export async function connectGateway(
  options: StackOptions,
  env: Record<string, string | undefined>,
  signal: AbortSignal | undefined,
  wrapWebSocket: ((base: WebSocketClass | undefined) => WebSocketClass) | undefined,
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
  const ticket = await LocalGateway.acquire(signal ? { signal } : {});
  // With a memory limit, a kernel's cgroups tell an out-of-memory death from any other (KernelDiedError 'oom').
  const diagnostics =
    options.memoryBytes === undefined
      ? ticket.diagnostics
      : { ...ticket.diagnostics, limitEvents: (id: string) => isolation().kernelLimitEvents(id, { pid: ticket.pid }) };
  const client = new GatewayClient({
    baseUrl: ticket.baseUrl,
    token: ticket.token,
    ownership: ticket.ownership,
    diagnostics,
    // The warm pool: a python3 kernel is claimed instead of started; a kill of a hung kernel is immediate.
    pool: ticket.pool,
    processes: ticket.processes,
    fetch: ticket.fetch,
    request: ticket.request,
    WebSocket: wrapWebSocket ? wrapWebSocket(ticket.WebSocket) : ticket.WebSocket,
  });
  return {
    client,
    kernelSpecDir: ticket.kernelSpecDir,
    pid: ticket.pid,
    embedded: true,
    pool: ticket.pool,
    release: () => ticket.release(),
  };
}

/**
 * What this machine can enforce for the kernels of `gateway`, checked against `limits` before any kernel starts:
 * `IsolationUnavailableError` (reason `limit-unenforceable`, the isolation package's message naming the limit and
 * why) for the first limit nothing here enforces. The answer is handed to every kernelspec install of the stack, so
 * the machine is looked at once.
 */
export async function checkLimits(
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

/** The kernelspec names of a stack's kernels, and the isolated ones this command installed. */
export interface StackKernelspecs {
  /** The kernelspec a new kernel of `language` starts from: the base one, or its isolated copy under the policy. */
  kernelName(language: Language): Promise<string>;
  /** The isolated kernelspecs this command installed: removed when it closes, unless a kernel still runs on one. */
  readonly installed: ReadonlySet<string>;
}

/**
 * The kernelspecs of a stack on `gateway`: `python3` and `ir`, the chosen interpreter's own kernelspec in place of
 * `python3`, and under a policy an isolated copy of each, installed on first use (after sweeping the copies left by
 * commands that were killed). On the embedded gateway, when its pool keeps `python3` (or `ir`) kernels, the
 * kernelspec a kernel starts from is kept pooled with that count: the chosen interpreter's own (one pool per
 * interpreter) and an isolated copy (one per policy and interpreter), so the next command asking for the same one
 * claims a started kernel.
 */
export function stackKernelspecs(
  gateway: GatewayConnection,
  stack: {
    cwd: string;
    interpreter: InterpreterFacts | undefined;
    readIsolation: IsolationPolicy | undefined;
    limitSupport: LimitFacts | undefined;
  },
): StackKernelspecs {
  const baseSpecs: Record<Language, string> = { ...BASE_KERNELSPEC };
  if (stack.interpreter) {
    if (gateway.kernelSpecDir === undefined) {
      throw new UsageError('--python needs the embedded gateway: this gateway has no kernelspec directory');
    }
    baseSpecs.python = installInterpreterSpec(gateway.kernelSpecDir, stack.interpreter.path);
  }
  const { readIsolation, limitSupport } = stack;
  const kernelNames = new Map<Language, Promise<string>>();
  const installed = new Set<string>();
  let swept: Promise<void> | undefined;
  // Whether the embedded gateway's pool keeps kernels of the language's stock kernelspec, whose count every kept
  // kernelspec of that language takes. Always from the stock one, never from another kept spec: the pool gives a
  // kept spec the count its base has in the pool option, and a kept spec has none there.
  const poolsLike = (language: Language): boolean =>
    gateway.pid !== undefined && (gateway.pool?.size(BASE_KERNELSPEC[language]) ?? 0) > 0;
  const baseName = (language: Language): string => {
    const base = baseSpecs[language];
    // The chosen interpreter's kernelspec, pooled like python3: the next command with the same interpreter claims
    // a started kernel of it (each call renews the keep).
    if (base !== BASE_KERNELSPEC[language] && poolsLike(language)) gateway.pool?.keep(base, BASE_KERNELSPEC[language]);
    return base;
  };
  const isolatedName = async (language: Language, policy: IsolationPolicy): Promise<string> => {
    // Before the first install: the specs left by commands that were killed before they could clean up.
    await (swept ??= sweepOrphanSpecs(gateway));
    // Pooled like its base kernelspec, the spec is the server's: the next command with the same policy (and the
    // same interpreter) claims a started kernel of it. Otherwise it is this command's, removed when it closes.
    const base = baseSpecs[language];
    const pooled = poolsLike(language);
    const isolated = await isolatedKernelName(gateway, base, policy, stack.cwd, limitSupport, pooled);
    if (pooled) gateway.pool?.keep(isolated, BASE_KERNELSPEC[language]);
    else installed.add(isolated);
    return isolated;
  };
  const kernelName = (language: Language): Promise<string> => {
    let name = kernelNames.get(language);
    if (!name) {
      name = readIsolation ? isolatedName(language, readIsolation) : Promise.resolve().then(() => baseName(language));
      kernelNames.set(language, name);
      // A failed install may succeed later (e.g. after the user fixes bwrap): do not cache the failure.
      name.catch(() => kernelNames.delete(language));
    }
    return name;
  };
  return { kernelName, installed };
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
export async function removeOwnSpecs(gateway: GatewayConnection, installed: ReadonlySet<string>): Promise<void> {
  if (gateway.kernelSpecDir === undefined || installed.size === 0) return;
  const inUse = await specsInUse(gateway);
  if (!inUse) return;
  try {
    isolation().removeIsolatedKernelSpecs({ kernelSpecDir: gateway.kernelSpecDir, names: installed, inUse });
  } catch {
    // best effort
  }
}
