/**
 * `LocalGateway` moved to `@kernelwarden/local-gateway`. What stays here, until this package's next major version,
 * is a thin forwarder so that existing imports keep working: each call loads `@kernelwarden/local-gateway` (an
 * optional peer dependency, never a static import: users of a remote gateway need not install it) and delegates.
 * The types are structural copies of the moved ones; `local-gateway`'s tests check that they still agree.
 */
import { KernelwardenError } from '@kernelwarden/core';
import type { GatewayClientOptions, KernelPool } from './gateway-client.js';

/** The package `LocalGateway` lives in now. */
export const LOCAL_GATEWAY_PACKAGE = '@kernelwarden/local-gateway';

/**
 * Codes of `LocalGatewayError`; `LOCAL_GATEWAY_NOT_INSTALLED` is this forwarder's own.
 * @deprecated Import `LocalGatewayErrorCode` from `@kernelwarden/local-gateway`.
 */
export type LocalGatewayErrorCode =
  | 'LOCAL_GATEWAY_COMMAND'
  | 'LOCAL_GATEWAY_STATE_DIR'
  | 'LOCAL_GATEWAY_INSECURE'
  | 'LOCAL_GATEWAY_TOKEN_REFUSED'
  | 'LOCAL_GATEWAY_CONFIG'
  | 'LOCAL_GATEWAY_NOT_INSTALLED';

/**
 * The embedded gateway cannot be provided (see `@kernelwarden/local-gateway`'s README for each code), or — code
 * `LOCAL_GATEWAY_NOT_INSTALLED` — `@kernelwarden/local-gateway` is not installed. `instanceof` and `isInstance`
 * also recognise the errors `@kernelwarden/local-gateway` throws (same brand).
 * @deprecated Import `LocalGatewayError` from `@kernelwarden/local-gateway`.
 */
export class LocalGatewayError extends KernelwardenError {
  static override readonly brand: string = 'LocalGatewayError';

  /** True for this class's errors and for `@kernelwarden/local-gateway`'s `LocalGatewayError`s. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return LocalGatewayError.isInstance(value);
  }
}

/**
 * Something `LocalGateway` did; never the token.
 * @deprecated Import `LocalGatewayEvent` from `@kernelwarden/local-gateway`.
 */
export type LocalGatewayEvent =
  | { type: 'lock-wait'; ownerPid: number }
  | { type: 'lock-takeover'; previousOwnerPid: number | undefined }
  | { type: 'server-reused' | 'server-ready'; baseUrl: string; pid: number }
  | { type: 'server-starting'; port: number; logFile: string }
  | { type: 'server-stopped'; pid: number; reason: 'unhealthy' | 'last-release' }
  | { type: 'server-untrusted'; reason: string }
  | { type: 'port-taken'; port: number }
  | { type: 'kernel-reaped'; kernelId: string; ownerPid: number }
  | { type: 'reap-failed'; kernelId: string; message: string };

/**
 * Which gateway: options of `acquire`, `stop` and `status` (documented in `@kernelwarden/local-gateway`).
 * @deprecated Import `LocalGatewayLocation` from `@kernelwarden/local-gateway`.
 */
export interface LocalGatewayLocation {
  /** Base directory of the state. */
  stateDir?: string;
  /** The jupyter-server executable. */
  command?: string;
  /** Aborts the operation. */
  signal?: AbortSignal;
}

/**
 * Options of `LocalGateway.acquire()` (documented in `@kernelwarden/local-gateway`).
 * @deprecated Import `LocalGatewayOptions` from `@kernelwarden/local-gateway`.
 */
export interface LocalGatewayOptions
  extends LocalGatewayLocation,
    Partial<
      Record<
        | 'lingerMs'
        | 'startupTimeoutMs'
        | 'requestTimeoutMs'
        | 'stopTimeoutMs'
        | 'maxKernels'
        | 'maxConcurrentStarts'
        | 'startQueueTimeoutMs',
        number
      >
    > {
  /** Extra `JUPYTER_PATH` directories of a server this call starts. */
  jupyterPath?: string[];
  /** Extra variables of a server this call starts (never a secret). */
  serverEnv?: Record<string, string>;
  /** Extra arguments of a server this call starts. */
  serverArgs?: string[];
  /** The `root_dir` of a server this call starts. */
  rootDir?: string;
  /** Told what happens. */
  onEvent?: (event: LocalGatewayEvent) => void;
  /** Started kernels kept ready per kernelspec. */
  pool?: Record<string, number>;
}

/**
 * Options of `LocalGateway.stop()`.
 * @deprecated Import `LocalGatewayStopOptions` from `@kernelwarden/local-gateway`.
 */
export interface LocalGatewayStopOptions extends LocalGatewayLocation {
  /** Grace between SIGTERM and SIGKILL. */
  stopTimeoutMs?: number;
}

/**
 * A lease on the embedded gateway: the options of a `GatewayClient` for it (address, token, ownership,
 * diagnostics, guarded transport), where its state is, and `release()`.
 * @deprecated Import `LocalGatewayLease` from `@kernelwarden/local-gateway`.
 */
export interface LocalGatewayLease
  extends Readonly<
      Required<
        Omit<GatewayClientOptions, 'requestTimeoutMs' | 'maxResponseBytes' | 'pool' | 'flavor' | 'kernelUsername'>
      >
    >,
    AsyncDisposable {
  /** The server's warm pool: claim a ready kernel, a kernelspec's count, pool a kernelspec like another. */
  readonly pool: KernelPool & { size(kernelName: string): number; keep(kernelName: string, like: string): void };
  /** A directory on the server's `JUPYTER_PATH` for kernelspecs. */
  readonly kernelSpecDir: string;
  /** This gateway's state directory. */
  readonly stateDir: string;
  /** The server's pid. */
  readonly pid: number;
  /** True when an already running server was reused. */
  readonly reused: boolean;
  /** Gives the lease back; idempotent. */
  release(opts?: { signal?: AbortSignal }): Promise<void>;
}

/**
 * What `LocalGateway.status()` reports: whether the server runs, where, who holds leases, which kernels it has.
 * @deprecated Import `LocalGatewayStatus` from `@kernelwarden/local-gateway`.
 */
export interface LocalGatewayStatus extends Record<'stateDir' | 'command' | 'interpreter', string> {
  /** True when a server is recorded, alive and answering. */
  running: boolean;
  /** The recorded server's address, pid and start time. */
  baseUrl?: string;
  pid?: number;
  startedAt?: string;
  /** Processes holding a lease, and the kernels the server lists with their creating process. */
  holders: { pid: number; acquiredAt: string }[];
  kernels: {
    id: string;
    name: string;
    executionState?: string;
    ownerPid?: number;
    ownerAlive?: boolean;
    pooled?: boolean;
  }[];
  /** The warm pool's counts per kernelspec. */
  pool: Record<string, { wanted: number; ready: number }>;
}

/** What this forwarder needs of `@kernelwarden/local-gateway`. */
interface LocalGatewayModule {
  LocalGateway: {
    acquire(options?: LocalGatewayOptions): Promise<LocalGatewayLease>;
    stop(options?: LocalGatewayStopOptions): Promise<{ stopped: boolean; pid?: number }>;
    status(options?: LocalGatewayLocation): Promise<LocalGatewayStatus>;
  };
}

let loaded: Promise<LocalGatewayModule> | undefined;

/**
 * Loads `specifier` (`@kernelwarden/local-gateway`) at run time; rejects with `LocalGatewayError`
 * (`LOCAL_GATEWAY_NOT_INSTALLED`) when it is not installed. The specifier is a variable so that neither the type
 * checker nor the bundler follows it: this package never depends on the one that depends on it.
 */
export function loadLocalGateway(specifier: string = LOCAL_GATEWAY_PACKAGE): Promise<LocalGatewayModule> {
  const load = async () => {
    try {
      return (await import(specifier)) as LocalGatewayModule;
    } catch (error) {
      const { code, message } = error as { code?: unknown; message?: unknown };
      if (code === 'ERR_MODULE_NOT_FOUND' && String(message).includes(`'${specifier}'`)) {
        throw new LocalGatewayError(
          `LocalGateway has moved to ${specifier}, which is not installed: install it (npm install ${specifier}) and import LocalGateway from it`,
          { code: 'LOCAL_GATEWAY_NOT_INSTALLED', cause: error },
        );
      }
      throw error;
    }
  };
  if (specifier !== LOCAL_GATEWAY_PACKAGE) return load();
  loaded ??= load().catch((error: unknown) => {
    loaded = undefined;
    throw error;
  });
  return loaded;
}

/**
 * The embedded Jupyter server, now `@kernelwarden/local-gateway`'s: each method loads that package and calls it
 * (rejecting with `LOCAL_GATEWAY_NOT_INSTALLED` when it is missing).
 * @deprecated Import `LocalGateway` from `@kernelwarden/local-gateway`; this forwarder goes in the next major version.
 */
export class LocalGateway {
  /**
   * Starts or reuses the embedded server and takes a lease on it.
   * @deprecated Use `LocalGateway.acquire()` from `@kernelwarden/local-gateway`.
   */
  static async acquire(options: LocalGatewayOptions = {}): Promise<LocalGatewayLease> {
    return (await loadLocalGateway()).LocalGateway.acquire(options);
  }

  /**
   * Stops the embedded server now, whoever holds leases.
   * @deprecated Use `LocalGateway.stop()` from `@kernelwarden/local-gateway`.
   */
  static async stop(options: LocalGatewayStopOptions = {}): Promise<{ stopped: boolean; pid?: number }> {
    return (await loadLocalGateway()).LocalGateway.stop(options);
  }

  /**
   * Reports whether the embedded server runs, who holds leases and which kernels it has.
   * @deprecated Use `LocalGateway.status()` from `@kernelwarden/local-gateway`.
   */
  static async status(options: LocalGatewayLocation = {}): Promise<LocalGatewayStatus> {
    return (await loadLocalGateway()).LocalGateway.status(options);
  }
}
