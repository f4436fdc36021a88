import type { GatewayClient } from './gateway-client.js';

/**
 * A kernel's `DELETE`, sent at most once at a time and never again once confirmed: a 2xx, 404 or 410 confirms; an
 * error, a thrown fetch or the timeout does not, and a later call sends another.
 */
export class KernelShutdown {
  #confirmed = false;
  #inFlight: Promise<{ confirmed: boolean }> | undefined;

  /** A shutdown was asked for (in flight or confirmed). */
  get asked(): boolean {
    return this.#confirmed || this.#inFlight !== undefined;
  }

  /** The answer of a confirmed or running shutdown; undefined when a new one must be sent. */
  pending(): Promise<{ confirmed: boolean }> | undefined {
    if (this.#confirmed) return Promise.resolve({ confirmed: true });
    return this.#inFlight;
  }

  /** Sends the `DELETE` of `kernelId`. */
  send(client: GatewayClient, kernelId: string, opts: { timeoutMs: number; signal?: AbortSignal | undefined }) {
    const attempt = (async () => {
      try {
        await client.deleteKernel(kernelId, { timeoutMs: opts.timeoutMs, signal: opts.signal });
        this.#confirmed = true;
        return { confirmed: true };
      } catch {
        return { confirmed: false };
      } finally {
        this.#inFlight = undefined;
      }
    })();
    this.#inFlight = attempt;
    return attempt;
  }
}
