// What `installIsolatedKernelSpec()` is given: the kernelspec to wrap and the options of the isolation.
import type { SandboxPolicy } from './bubblewrap.js';
import type { LimitFacts } from './limit-support.js';
import type { DetectSandboxOptions } from './sandbox.js';

/** A kernelspec to wrap, as `GET /api/kernelspecs` returns it (`spec` plus its `name`). */
export interface BaseKernelSpec {
  /** The kernelspec's name, e.g. `python3` or `ir`. */
  name: string;
  /** Its command line, with jupyter's `{connection_file}` placeholder. */
  argv: readonly string[];
  /** Environment variables the gateway sets for the kernel (kept as they are). */
  env?: Readonly<Record<string, string>>;
  /** Shown name; the isolated spec appends ` (isolated)`. */
  display_name: string;
  /** The kernel's language, e.g. `python` or `R`. */
  language: string;
  /** How the gateway interrupts the kernel. @defaultValue 'signal' */
  interrupt_mode?: 'signal' | 'message';
  /** Kept, with a `kernelwarden` entry added describing the isolation. */
  metadata?: Readonly<Record<string, unknown>>;
  /** The base kernelspec's own folder; needed only when `argv` uses `{resource_dir}`. */
  resourceDir?: string;
}

/** Options of `installIsolatedKernelSpec()`. */
export interface InstallIsolatedKernelSpecOptions extends DetectSandboxOptions {
  /**
   * A directory on the local gateway's kernelspec search path (`LocalGateway.acquire()`'s `kernelSpecDir`).
   * Absent (a remote gateway) -> `IsolationUnavailableError` with `reason: 'remote-gateway'`.
   */
  kernelSpecDir: string | undefined;
  /** The kernelspec whose argv is wrapped. */
  baseSpec: BaseKernelSpec;
  /**
   * The policy to enforce (from `createReadIsolationPolicy()`, `createKernelPolicy()` or `teamReadPolicy()`): hidden
   * directories, limits (`memoryBytes`, `maxProcesses`, `cpuSeconds`, `network`), or both.
   */
  policy: SandboxPolicy;
  /** The kernel's working directory: read-write, and its current directory. */
  workspace: string;
  /** More directories the kernel may write (bound read-write). @defaultValue [] */
  extraReadWrite?: readonly string[];
  /** More directories hidden like the policy's roots, e.g. the gateway's state directory. @defaultValue [] */
  hide?: readonly string[];
  /**
   * Directories given a private tmpfs per kernel.
   * @defaultValue [policy.tempDir, '/tmp'], none for a policy without hidden roots
   */
  privateTemp?: readonly string[];
  /**
   * Also hide kernelwarden's state directory (where `LocalGateway` keeps its token): `KERNELWARDEN_STATE_DIR`, else
   * `$XDG_STATE_HOME/kernelwarden`, else `~/.local/state/kernelwarden`, when it exists. @defaultValue true
   */
  hideStateDir?: boolean;
  /**
   * Replaces a bare `python`/`python3` `argv[0]` of the base spec, as jupyter would with its own interpreter.
   * @defaultValue the interpreter `jupyter-server` on the search path runs on
   */
  pythonExecutable?: string;
  /**
   * The pid of the jupyter-server that will launch the kernels (a LocalGateway ticket's `pid`): kernels' cgroups are
   * made in its cgroups, so that is where `detectLimits()` looks. @defaultValue process.pid
   */
  gatewayPid?: number;
  /**
   * What this machine can enforce (`detectLimits()`'s answer, or facts staged by a test); given, nothing is detected.
   * @defaultValue detectLimits({ pid: gatewayPid }) when the policy has limits
   */
  limitSupport?: LimitFacts;
  /**
   * The process the spec belongs to: it is part of the spec's name, `sweepIsolatedKernelSpecs()` removes the spec
   * once that process is gone, and `removeIsolatedKernelSpecs()` is for the process that installed it. The LocalGateway
   * server's pid (a ticket's `pid`) makes one spec per request shared by every process of the user on that server —
   * what a warm pool of isolated kernels needs (`ticket.pool.keep(name, base)`): it lives as long as the server.
   * Must be a live process of this user. @defaultValue process.pid
   */
  ownerPid?: number;
}
