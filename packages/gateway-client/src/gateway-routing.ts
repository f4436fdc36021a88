// How a client built on a `GatewaySet` routes: a kernel's calls to the gateway that runs it, a create to the gateway
// the set places it on. Typed by what it uses of a client and of the set (`GatewayClient` and `GatewayRouter`).
import { GatewayCapacityError, GatewayUnavailableError } from './errors.js';
import type { RequestOptions } from './gateway-transport.js';
import type { KernelModel } from './kernel-models.js';

/** What routing uses of one gateway's client. */
export interface RoutedClient<Spec, CreateOptions> {
  getKernel(id: string, opts: RequestOptions): Promise<KernelModel | undefined>;
  createKernel(spec: Spec, opts: CreateOptions): Promise<KernelModel>;
}

/** What routing uses of the set. */
export interface Routes<C> {
  clientFor(kernelId: string): C | undefined;
  healthyClients(): C[];
  placeKernel(request: { kernelName: string }, exclude?: ReadonlySet<C>): Promise<C>;
  settled(client: C, outcome: { unreachable?: Error }): void;
  placed(client: C, kernelId: string): void;
}

/** The client of the gateway running `kernelId`: the one the set placed it on, else the first healthy one that has it. */
export async function ownerOf<C extends RoutedClient<never, never>>(
  router: Routes<C>,
  kernelId: string,
  opts: RequestOptions,
): Promise<C | undefined> {
  const known = router.clientFor(kernelId);
  if (known) return known;
  for (const client of router.healthyClients()) {
    try {
      if (await client.getKernel(kernelId, opts)) {
        router.placed(client, kernelId);
        return client;
      }
    } catch (error) {
      if (opts.signal?.aborted) throw error;
    }
  }
  return undefined;
}

/** A set's create: on the gateway its placement chooses, the next one when that one is unreachable or full. */
export async function createPlaced<
  Spec extends { name: string },
  CreateOptions extends RequestOptions,
  C extends RoutedClient<Spec, CreateOptions>,
>(router: Routes<C>, spec: Spec, opts: CreateOptions): Promise<KernelModel> {
  const tried = new Set<C>();
  let last: unknown;
  for (;;) {
    let client: C;
    try {
      client = await router.placeKernel({ kernelName: spec.name }, tried);
    } catch (error) {
      throw last ?? error;
    }
    tried.add(client);
    try {
      const model = await client.createKernel(spec, opts);
      router.settled(client, {});
      router.placed(client, model.id);
      return model;
    } catch (error) {
      const unreachable = GatewayUnavailableError.isInstance(error) ? error : undefined;
      router.settled(client, unreachable ? { unreachable } : {});
      if (opts.signal?.aborted || !(unreachable || GatewayCapacityError.isInstance(error))) throw error;
      last = error;
    }
  }
}
