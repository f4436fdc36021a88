import type { Clock } from '@kernelwarden/core';
import type { JupyterMessage, WireFormat } from '@kernelwarden/jupyter-protocol';
import type { FakeKernelOptions, KernelScript } from './fake-kernel.js';

/** One kernelspec a FakeGateway offers, and how kernels made from it behave. */
export interface FakeKernelSpec extends FakeKernelOptions {
  /** `spec.display_name`. @defaultValue the spec's name */
  displayName?: string;
  /** `spec.argv`. @defaultValue a python -m ipykernel_launcher command line */
  argv?: string[];
  /** `spec.env`. @defaultValue {} */
  env?: Record<string, string>;
}

/** Options of `FakeGateway.start()`. */
export interface FakeGatewayOptions {
  /** The token clients must send (`Authorization: token …` or `?token=`); `false` turns auth off. @defaultValue a random token */
  token?: string | false;
  /** The script of every kernelspec that has none. @defaultValue pythonLikeScript */
  script?: KernelScript;
  /** The kernelspecs offered, by name. @defaultValue `{ python3: {} }` */
  kernelSpecs?: Record<string, FakeKernelSpec>;
  /** The kernelspec used when a create names none. @defaultValue the first of `kernelSpecs` */
  defaultKernelName?: string;
  /** The wire formats the channels socket accepts; v1 is picked when offered and allowed. @defaultValue ['v1', 'legacy'] */
  wireFormats?: WireFormat[];
  /** The clock of script sleeps and fault delays. @defaultValue systemClock */
  clock?: Clock;
  /** Aborting closes the gateway. */
  signal?: AbortSignal;
  /**
   * Which server the gateway plays. `'jupyter'`: jupyter-server 1.x (a create answers at once under an id of its own;
   * `kernel_id` and `env` are ignored). `'enterprise-gateway'`: Jupyter Enterprise Gateway — see
   * `FakeEnterpriseGatewayOptions`. @defaultValue 'jupyter'
   */
  flavor?: 'jupyter' | 'enterprise-gateway';
  /**
   * Enterprise Gateway only: how long each launch takes before its create answers (the create blocks meanwhile, as
   * EG's does while its kernel pod starts), in ms of the gateway's clock. @defaultValue 0
   */
  launchDelayMs?: number;
  /**
   * Enterprise Gateway only: the most kernels it runs, launches in progress included (EG's `max_kernels`); a create
   * past it is answered 403 "Resource Limit". @defaultValue no limit
   */
  maxKernels?: number;
  /**
   * Enterprise Gateway only: the most kernels one `KERNEL_USERNAME` runs (EG's `max_kernels_per_user`); a create
   * past it is answered 403 "A max kernels per user limit has been set to N …". @defaultValue no limit
   */
  maxKernelsPerUser?: number;
  /**
   * Enterprise Gateway only: the launch timeout in seconds when a create sends no `KERNEL_LAUNCH_TIMEOUT` (EG's
   * `EG_KERNEL_LAUNCH_TIMEOUT`). A launch longer than its timeout is killed and its create answered HTTP 500.
   * @defaultValue 30
   */
  launchTimeoutSeconds?: number;
  /**
   * Enterprise Gateway only: names besides `KERNEL_*` that a create's `env` may pass to the kernel (EG's
   * `client_envs`: env `EG_CLIENT_ENVS`, formerly `EG_ENV_WHITELIST`; not its `inherited_envs`, formerly
   * `EG_ENV_PROCESS_WHITELIST`, which pass variables of EG's own process). `['*']` passes every name.
   * @defaultValue []
   */
  clientEnvs?: string[];
  /**
   * Enterprise Gateway only: whether `GET /api/kernels` lists the kernels (EG's `list_kernels`, `EG_LIST_KERNELS`);
   * when false it answers 403 "Forbidden". @defaultValue true
   */
  listKernels?: boolean;
}

/** The REST routes and the channels handshake, as named in faults and records. */
export type FakeGatewayRoute =
  | 'api'
  | 'kernelspecs'
  | 'list'
  | 'get'
  | 'create'
  | 'delete'
  | 'interrupt'
  | 'restart'
  | 'channels'
  | 'unknown';

/**
 * How a faulted request is answered: an HTTP status (with a JSON error body), `'hang'` (never answered until the
 * client gives up or the gateway closes), `'reset'` (the connection is destroyed), or a status with a body and delay.
 */
export type FaultAnswer = number | 'hang' | 'reset' | { status: number; body?: unknown; delayMs?: number };

/** One HTTP request (or channels handshake) the gateway received. */
export interface RecordedRequest {
  method: string;
  /** The path without the query string. */
  path: string;
  /** The query parameters, except `token`. */
  query: Record<string, string>;
  route: FakeGatewayRoute;
  kernelId?: string;
  /** The parsed JSON body, when there was one. */
  body?: unknown;
  /** How the request authenticated: by header, by query, not at all, or with a wrong token. */
  auth: 'header' | 'query' | 'none' | 'bad';
  /** What it was answered. */
  answer: number | 'hang' | 'reset' | 'upgraded';
}

/** One channels frame, received from or sent to a client. */
export interface RecordedFrame {
  direction: 'in' | 'out';
  kernelId: string;
  sessionId: string | undefined;
  format: WireFormat;
  /** The decoded message; absent for frames that did not decode (see `error`) and raw frames sent by a script. */
  message?: JupyterMessage;
  /** The bytes or text on the wire. */
  raw: string | Uint8Array;
  /** Why an incoming frame could not be decoded. */
  error?: string;
  /** True for a buffered message replayed on reconnect. */
  replayed?: boolean;
}
