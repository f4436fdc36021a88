import { dirname } from 'node:path';
import { SANDBOX_BASE_ARGS } from './bubblewrap.js';
import { type CgroupController, type CgroupDetection, detectCgroups } from './cgroup.js';
import { IsolationUnavailableError } from './errors.js';
import { type KernelLimits, LIMIT_LABELS, LIMIT_NAMES, type LimitName, requestedLimits } from './limits.js';
import { type DetectSandboxOptions, detectSandbox, findExecutable } from './sandbox.js';
import { runProcess } from './subprocess.js';

/** What enforces a limit: a cgroup controller, a per-process rlimit, or bubblewrap's network namespace. */
export type LimitMechanism = 'cgroup-v1' | 'cgroup-v2' | 'rlimit' | 'network-namespace';

/** Whether one limit can be enforced here, and by what. */
export interface LimitStatus {
  /** True when a kernel asking for this limit can be started. */
  readonly enforceable: boolean;
  /** What enforces it, strongest first (a cgroup, then the rlimit that turns a big allocation into a cell error). */
  readonly mechanisms: readonly LimitMechanism[];
  /** One line for people: what enforces it and where, or why nothing can. */
  readonly detail: string;
}

/** The facts about this machine that decide how limits are enforced (`detectLimits()` finds them). */
export interface LimitFacts {
  /** Whether the bubblewrap sandbox works (limits need it: without it a kernel could lift them). */
  readonly sandbox: { readonly available: boolean; readonly message?: string };
  /** The writable cgroup controllers, and why the others cannot be used. */
  readonly cgroups: CgroupDetection;
  /** util-linux `prlimit`, which sets the rlimits before the sandbox starts; undefined when there is none. */
  readonly prlimitPath: string | undefined;
  /** True when kernels run as root (uid 0), for whom Linux does not enforce `RLIMIT_NPROC`. */
  readonly root: boolean;
  /** Whether bubblewrap can give a sandbox a network namespace of its own (`--unshare-net`). */
  readonly networkNamespace: { readonly available: boolean; readonly message?: string };
}

/** `detectLimits()`'s answer: the facts, and what they make of each limit. */
export interface LimitSupport extends LimitFacts {
  /** Each limit: enforceable or not, by what. */
  readonly limits: Readonly<Record<LimitName, LimitStatus>>;
}

/** Options of `detectLimits()`. */
export interface DetectLimitsOptions extends DetectSandboxOptions {
  /**
   * The process whose cgroups kernels' cgroups are made in: the jupyter-server that launches them (a LocalGateway
   * lease's `pid`). @defaultValue process.pid
   */
  pid?: number;
}

/** The cgroup part of a plan: one controller, the limit it holds, and the values written into a kernel's cgroup. */
export interface CgroupLimit {
  /** The controller, where it is mounted and where kernels' cgroups go. */
  readonly controller: CgroupController;
  /** The limit it enforces. */
  readonly limit: LimitName;
  /** Control files and their values, written in this order into the kernel's cgroup at every launch. */
  readonly settings: readonly (readonly [file: string, value: string])[];
}

/** How a kernel's limits are enforced at its launch. */
export interface LimitPlan {
  /** cgroups to make, set and join before the sandbox starts. */
  readonly cgroups: readonly CgroupLimit[];
  /** Soft and hard rlimits prlimit sets on the sandbox (and so on every process in it). */
  readonly rlimits: { readonly data?: number; readonly nproc?: number; readonly cpu?: number };
  /** Give the sandbox a network namespace of its own. */
  readonly unshareNet: boolean;
  /** What enforces each requested limit. */
  readonly mechanisms: Readonly<Partial<Record<LimitName, readonly LimitMechanism[]>>>;
  /** Where prlimit is, when `rlimits` is not empty. */
  readonly prlimitPath: string | undefined;
}

type Decision =
  | {
      ok: true;
      mechanisms: LimitMechanism[];
      detail: string;
      cgroup?: CgroupLimit;
      rlimit?: { name: 'data' | 'nproc' | 'cpu'; value: number };
      unshareNet?: boolean;
    }
  | { ok: false; why: string };

function cgroupMechanism(c: CgroupController): LimitMechanism {
  return c.version === 1 ? 'cgroup-v1' : 'cgroup-v2';
}

function describeCgroup(c: CgroupController): string {
  return `a cgroup ${c.version === 1 ? 'v1' : 'v2'} ${c.controller} controller (kernels' cgroups in ${c.base})`;
}

const NO_PRLIMIT = 'no prlimit (util-linux) is installed to set rlimits';

function controllerOf(facts: LimitFacts, name: 'memory' | 'pids'): CgroupController | undefined {
  return facts.cgroups.controllers.find((c) => c.controller === name);
}

/** The control files that cap a kernel's memory at `bytes` (and its swap, where the controller has the file). */
function memorySettings(memory: CgroupController, bytes: string): [string, string][] {
  if (memory.version === 1) {
    return [
      ['memory.limit_in_bytes', bytes],
      ...(memory.files.includes('memory.memsw.limit_in_bytes')
        ? [['memory.memsw.limit_in_bytes', bytes] as [string, string]]
        : []),
    ];
  }
  return [
    ['memory.max', bytes],
    ...(memory.files.includes('memory.swap.max') ? [['memory.swap.max', '0'] as [string, string]] : []),
  ];
}

/** `memoryBytes`: a memory cgroup, with RLIMIT_DATA on each process where prlimit is; else RLIMIT_DATA alone. */
function decideMemory(value: number | boolean, facts: LimitFacts): Decision {
  const memory = controllerOf(facts, 'memory');
  const rlimit = facts.prlimitPath ? { name: 'data' as const, value: Number(value) } : undefined;
  if (memory) {
    return {
      ok: true,
      mechanisms: rlimit ? [cgroupMechanism(memory), 'rlimit'] : [cgroupMechanism(memory)],
      detail: `${describeCgroup(memory)} for the kernel and all it starts${rlimit ? ', and RLIMIT_DATA on each process' : ` (no RLIMIT_DATA: ${NO_PRLIMIT})`}`,
      cgroup: { controller: memory, limit: 'memoryBytes', settings: memorySettings(memory, String(value)) },
      ...(rlimit ? { rlimit } : {}),
    };
  }
  if (rlimit) {
    return {
      ok: true,
      mechanisms: ['rlimit'],
      detail: `RLIMIT_DATA on each process of the kernel, separately (no writable memory cgroup: ${facts.cgroups.problems.memory ?? 'none found'})`,
      rlimit,
    };
  }
  return {
    ok: false,
    why: `no writable memory cgroup (${facts.cgroups.problems.memory ?? 'none found'}) and ${NO_PRLIMIT}`,
  };
}

/** `maxProcesses`: a pids cgroup; else RLIMIT_NPROC, which root is not held to. */
function decideProcesses(value: number | boolean, facts: LimitFacts): Decision {
  const pids = controllerOf(facts, 'pids');
  if (pids) {
    return {
      ok: true,
      mechanisms: [cgroupMechanism(pids)],
      detail: `${describeCgroup(pids)}, counting every process and thread of the kernel`,
      cgroup: { controller: pids, limit: 'maxProcesses', settings: [['pids.max', String(value)]] },
    };
  }
  const why = `no writable pids cgroup (${facts.cgroups.problems.pids ?? 'none found'})`;
  if (facts.root) {
    return {
      ok: false,
      why: `${why}, and Linux does not enforce RLIMIT_NPROC for root: run kernelwarden as a non-root user, or where it can write a pids cgroup`,
    };
  }
  if (!facts.prlimitPath) return { ok: false, why: `${why} and ${NO_PRLIMIT}` };
  return {
    ok: true,
    mechanisms: ['rlimit'],
    detail: `RLIMIT_NPROC, which counts every process and thread of the user, not only the kernel's (${why})`,
    rlimit: { name: 'nproc', value: Number(value) },
  };
}

/** `cpuSeconds`: RLIMIT_CPU. */
function decideCpu(value: number | boolean, facts: LimitFacts): Decision {
  if (!facts.prlimitPath) return { ok: false, why: NO_PRLIMIT };
  return {
    ok: true,
    mechanisms: ['rlimit'],
    detail: 'RLIMIT_CPU on each process of the kernel: the CPU time of its whole life, each process separately',
    rlimit: { name: 'cpu', value: Math.ceil(Number(value)) },
  };
}

/** `network: false`: bubblewrap's network namespace. */
function decideNetwork(value: number | boolean, facts: LimitFacts): Decision {
  if (value !== false) return { ok: true, mechanisms: [], detail: 'the network is shared' };
  if (!facts.networkNamespace.available) {
    return {
      ok: false,
      why: `bubblewrap cannot make a network namespace here: ${facts.networkNamespace.message ?? ''}`,
    };
  }
  return {
    ok: true,
    mechanisms: ['network-namespace'],
    detail: 'a network namespace of its own with only loopback (bubblewrap --unshare-net)',
    unshareNet: true,
  };
}

const DECIDERS: Record<LimitName, (value: number | boolean, facts: LimitFacts) => Decision> = {
  memoryBytes: decideMemory,
  maxProcesses: decideProcesses,
  cpuSeconds: decideCpu,
  network: decideNetwork,
};

/** How `limit` at `value` is enforced on a machine with `facts`, or why it cannot be: every limit needs the sandbox. */
function decide(limit: LimitName, value: number | boolean, facts: LimitFacts): Decision {
  if (!facts.sandbox.available) {
    return {
      ok: false,
      why: `it needs the bubblewrap sandbox (without it the kernel could lift its limits): ${facts.sandbox.message ?? 'unavailable'}`,
    };
  }
  return DECIDERS[limit](value, facts);
}

/**
 * Decides how each limit of `limits` is enforced on a machine with `facts`: the strongest mechanism per limit (a
 * cgroup where one is writable, else an rlimit; bubblewrap's network namespace for `network: false`). Pure. Throws
 * `IsolationUnavailableError` (reason `limit-unenforceable`, `limit` set) for the first limit nothing can enforce —
 * the kernel must then not start.
 *
 * Use it before launching kernels under limits; `installIsolatedKernelSpec()` calls it for you.
 */
export function planLimits(limits: KernelLimits, facts: LimitFacts): LimitPlan {
  const cgroups: CgroupLimit[] = [];
  const rlimits: { data?: number; nproc?: number; cpu?: number } = {};
  const mechanisms: Partial<Record<LimitName, readonly LimitMechanism[]>> = {};
  let unshareNet = false;
  const requested = requestedLimits(limits);
  for (const limit of LIMIT_NAMES) {
    const value = requested[limit];
    if (value === undefined) continue;
    const decision = decide(limit, value, facts);
    if (!decision.ok) {
      throw new IsolationUnavailableError(
        `The kernel was not started: its ${LIMIT_LABELS[limit]} cannot be enforced here: ${decision.why}`,
        { reason: 'limit-unenforceable', limit },
      );
    }
    mechanisms[limit] = decision.mechanisms;
    if (decision.cgroup) cgroups.push(decision.cgroup);
    if (decision.rlimit) rlimits[decision.rlimit.name] = decision.rlimit.value;
    if (decision.unshareNet) unshareNet = true;
  }
  return {
    cgroups,
    rlimits,
    unshareNet,
    mechanisms,
    prlimitPath: Object.keys(rlimits).length > 0 ? facts.prlimitPath : undefined,
  };
}

/** What `facts` make of each limit (as `planLimits()` would decide it alone). */
export function limitStatuses(facts: LimitFacts): Record<LimitName, LimitStatus> {
  const sample: Record<LimitName, number | boolean> = {
    memoryBytes: 1024 ** 3,
    maxProcesses: 64,
    cpuSeconds: 60,
    network: false,
  };
  const out = {} as Record<LimitName, LimitStatus>;
  for (const limit of LIMIT_NAMES) {
    const d = decide(limit, sample[limit], facts);
    out[limit] = d.ok
      ? { enforceable: true, mechanisms: d.mechanisms, detail: d.detail }
      : { enforceable: false, mechanisms: [], detail: `not enforceable: ${d.why}` };
  }
  return out;
}

const networkWorks = new Map<string, true>();

async function detectNetworkNamespace(
  sandbox: { bwrapPath: string; envPath: string },
  opts: DetectSandboxOptions,
): Promise<{ available: boolean; message?: string }> {
  if (networkWorks.has(sandbox.bwrapPath)) return { available: true };
  const trial = await runProcess(
    [sandbox.bwrapPath, ...SANDBOX_BASE_ARGS, '--unshare-net', '--', sandbox.envPath, 'true'],
    { signal: opts.signal, timeoutMs: opts.timeoutMs ?? 10_000 },
  );
  if (trial.code === 0) {
    networkWorks.set(sandbox.bwrapPath, true);
    return { available: true };
  }
  const said = trial.stderr.trim().split('\n').at(-1) ?? '';
  return {
    available: false,
    message: `bwrap --unshare-net failed (exit ${trial.code ?? trial.signal})${said ? `: ${said}` : ''}`,
  };
}

/**
 * Finds out which limits can be enforced on this machine and by what: the bubblewrap sandbox (`detectSandbox()`),
 * writable memory and pids cgroups for kernels launched by process `pid` (checked by making one and removing it),
 * util-linux `prlimit` for the rlimits, whether kernels run as root (`RLIMIT_NPROC` is not enforced for root), and a
 * trial sandbox with a network namespace of its own. Never throws for what is missing: each limit's status says.
 *
 * Use it to report (`kernelwarden doctor`); `installIsolatedKernelSpec()` runs it (or takes its answer as
 * `limitSupport`) before installing a kernel with limits.
 */
export async function detectLimits(opts: DetectLimitsOptions = {}): Promise<LimitSupport> {
  const sandbox = await detectSandbox(opts);
  const envDir = sandbox.available ? dirname(sandbox.envPath) : undefined;
  const prlimitPath =
    (envDir ? findExecutable('prlimit', envDir) : undefined) ??
    findExecutable('prlimit', '/usr/bin:/bin') ??
    findExecutable('prlimit', opts.searchPath ?? process.env.PATH);
  const facts: LimitFacts = {
    sandbox: sandbox.available ? { available: true } : { available: false, message: sandbox.message },
    cgroups: detectCgroups({ pid: opts.pid }),
    prlimitPath,
    root: process.getuid?.() === 0,
    networkNamespace: sandbox.available
      ? await detectNetworkNamespace(sandbox, opts)
      : { available: false, message: sandbox.message },
  };
  return { ...facts, limits: limitStatuses(facts) };
}
