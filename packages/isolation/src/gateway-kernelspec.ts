import { InvalidOptionsError } from '@kernelwarden/core';
import { IsolationUnavailableError } from './errors.js';
import { type BaseKernelSpec, type InstallIsolatedKernelSpecOptions, installIsolatedKernelSpec } from './kernelspec.js';

/** A gateway as `LocalGateway.acquire()` returns it; a remote one has no `kernelSpecDir`. */
export interface IsolationGateway {
  /** The gateway's base URL. */
  baseUrl: string;
  /** Its token, sent as `Authorization: token …`. */
  token?: string;
  /** Its local kernelspec directory; absent for a remote gateway. */
  kernelSpecDir?: string;
  /** The pid of its server, whose cgroups kernels' cgroups are made in (limits). */
  pid?: number;
}

/** Options of `prepareIsolatedKernel()`. */
export interface PrepareIsolatedKernelOptions
  extends Omit<InstallIsolatedKernelSpecOptions, 'kernelSpecDir' | 'baseSpec'> {
  /** The gateway the kernel will be started on. */
  gateway: IsolationGateway;
  /** The kernelspec to isolate, as the gateway names it. @defaultValue 'python3' */
  kernelName?: string;
  /** The fetch used for `GET /api/kernelspecs`. @defaultValue globalThis.fetch */
  fetch?: typeof globalThis.fetch;
}

/**
 * Looks `kernelName` up on the gateway (`GET /api/kernelspecs`), installs its isolated wrapper into the gateway's
 * `kernelSpecDir` (`installIsolatedKernelSpec()`: sandbox check and probe first) and returns the name to start.
 *
 * Use it in a kernel factory that received a `readIsolation` policy:
 * `GatewayKernel.start({ gateway, kernelName: await prepareIsolatedKernel({ gateway, policy, workspace }) })`.
 * A gateway without `kernelSpecDir` (remote) is refused with `IsolationUnavailableError` before any request.
 */
export async function prepareIsolatedKernel(opts: PrepareIsolatedKernelOptions): Promise<string> {
  const { gateway, kernelName = 'python3', fetch: fetchImpl = globalThis.fetch, ...install } = opts;
  if (!gateway?.kernelSpecDir) {
    throw new IsolationUnavailableError(
      `The gateway at ${gateway?.baseUrl} has no local kernelspec directory (a remote gateway): read isolation ` +
        'cannot be enforced on its kernels, so none is started',
      { reason: 'remote-gateway' },
    );
  }
  if (typeof gateway.baseUrl !== 'string' || !/^https?:\/\//.test(gateway.baseUrl)) {
    throw new InvalidOptionsError([{ path: 'gateway.baseUrl', message: 'expected an http(s) URL' }], {
      subject: 'isolated kernel',
    });
  }
  const url = `${gateway.baseUrl.replace(/\/+$/, '')}/api/kernelspecs`;
  let res: Response;
  try {
    res = await fetchImpl(url, {
      headers: gateway.token ? { Authorization: `token ${gateway.token}` } : {},
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
  } catch (cause) {
    if (opts.signal?.aborted) throw opts.signal.reason;
    throw new IsolationUnavailableError(`Could not reach the gateway at ${gateway.baseUrl} to read its kernelspecs`, {
      reason: 'base-kernelspec-unavailable',
      cause,
    });
  }
  if (!res.ok) {
    throw new IsolationUnavailableError(
      `Could not read the kernelspecs of the gateway at ${gateway.baseUrl} (HTTP ${res.status})`,
      { reason: 'base-kernelspec-unavailable' },
    );
  }
  let listing: { kernelspecs?: Record<string, { spec?: Omit<BaseKernelSpec, 'name'> }> };
  try {
    listing = (await res.json()) as typeof listing;
  } catch (cause) {
    throw new IsolationUnavailableError(
      `The gateway at ${gateway.baseUrl} answered its kernelspec listing with something that is not JSON`,
      { reason: 'base-kernelspec-unavailable', cause },
    );
  }
  const spec = listing.kernelspecs?.[kernelName]?.spec;
  if (!spec) {
    throw new InvalidOptionsError(
      [{ path: 'kernelName', message: `the gateway has no kernelspec named ${JSON.stringify(kernelName)}` }],
      { subject: 'isolated kernel' },
    );
  }
  return installIsolatedKernelSpec({
    ...(gateway.pid !== undefined ? { gatewayPid: gateway.pid } : {}),
    ...install,
    kernelSpecDir: gateway.kernelSpecDir,
    baseSpec: { ...spec, name: kernelName },
  });
}
