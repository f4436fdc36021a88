import {
  type Clock,
  InvalidOptionsError,
  isClock,
  lazy,
  systemClock,
  type Timer,
  TypedEmitter,
} from '@kernelwarden/core';
import { GatewayUnavailableError } from './errors.js';
import { GatewayClient, type GatewayRouter, ROUTER } from './gateway-client.js';
import type { GatewayClientOptions } from './gateway-client-options.js';
import { parseOptions } from './validation.js';
import { zod } from './zod.js';

/** What a `GatewaySet` knows of one of its gateways. */
export interface GatewayHealth {
  /** The gateway's client. */
  readonly client: GatewayClient;
  /** Its base URL (never with a token). */
  readonly baseUrl: string;
  /** False once it failed `failuresBeforeDown` health checks in a row, until it answers one again. */
  readonly healthy: boolean;
  /**
   * How many kernels it runs: its `GET /api/kernels` count at the last check or the kernels this set placed there and
   * knows alive, whichever is more (only the latter where listing is refused, as an Enterprise Gateway may), plus
   * starts placed there in flight.
   */
  readonly kernels: number;
  /** Health checks failed in a row. */
  readonly failures: number;
  /** Why the last check failed, while it is failing. */
  readonly lastError: Error | undefined;
}

/** What a placement is asked to place. */
export interface PlacementRequest {
  /** The kernelspec the start wants. */
  readonly kernelName: string;
}

/**
 * Chooses the gateway of a new kernel among the healthy ones (never empty; in the order the set was given, gateways
 * already tried for this start left out), or returns undefined to refuse them all.
 */
export type PlaceKernel = (
  candidates: readonly GatewayHealth[],
  request: PlacementRequest,
) => GatewayClient | GatewayHealth | undefined;

/**
 * The default placement: the healthy gateway with the fewest kernels; on a tie, the one given first.
 */
export const fewestKernels: PlaceKernel = (candidates) => {
  let best: GatewayHealth | undefined;
  for (const c of candidates) if (!best || c.kernels < best.kernels) best = c;
  return best;
};

/** The interval of a set's health checks while it has kernels: 2 s. */
export const DEFAULT_HEALTH_INTERVAL_MS = 2000;
/** The deadline of each health check (`GET /api/kernels`): 2 s. */
export const DEFAULT_HEALTH_TIMEOUT_MS = 2000;
/** Failed health checks in a row before a gateway is down: 2. */
export const DEFAULT_FAILURES_BEFORE_DOWN = 2;

/** Options of `new GatewaySet()`. */
export interface GatewaySetOptions {
  /** Where a new kernel goes. @defaultValue {@link fewestKernels} */
  place?: PlaceKernel;
  /** The interval of health checks while the set has kernels or starts. @defaultValue {@link DEFAULT_HEALTH_INTERVAL_MS} */
  healthIntervalMs?: number;
  /** The deadline of each health check. @defaultValue {@link DEFAULT_HEALTH_TIMEOUT_MS} */
  healthTimeoutMs?: number;
  /** Failed checks in a row before a gateway is down. @defaultValue {@link DEFAULT_FAILURES_BEFORE_DOWN} */
  failuresBeforeDown?: number;
  /** The clock of the health checks. @defaultValue systemClock */
  clock?: Clock;
}

/** Events of a `GatewaySet`. */
export interface GatewaySetEventMap {
  /** A gateway failed `failuresBeforeDown` checks in a row: new kernels skip it; its kernels were failed. */
  'gateway-down': { baseUrl: string; error: Error; lostKernels: string[] };
  /** A gateway that was down answered a check again: new kernels may go there. */
  'gateway-up': { baseUrl: string };
}

/** What the set needs of a kernel placed on one of its gateways (`GatewayKernel` is one). */
export interface PlacedKernel {
  readonly id: string;
  isAlive(): boolean;
  /** Fails the handle at once with `GatewayDownError` (its gateway is down). */
  gatewayDown(cause?: unknown): void;
}

interface Member {
  readonly client: GatewayClient;
  healthy: boolean;
  failures: number;
  lastError: Error | undefined;
  /** The gateway's listed count at the last good check; undefined where listing is refused or before a check. */
  listed: number | undefined;
  /** When it was last checked (clock ms), or -Infinity. */
  checkedAt: number;
  /** Starts placed here and not settled. */
  starting: number;
  /** Kernels this set placed here, by id. */
  readonly kernels: Map<string, PlacedKernel>;
  /** Kernels failed when the gateway went down: deleted once it answers again. */
  readonly lost: Set<string>;
  checking: Promise<void> | undefined;
}

const optionsSchema = lazy(() => {
  const { z } = zod();
  const ms = z.number().finite().positive();
  return z.object({
    place: z.custom<PlaceKernel>((v) => typeof v === 'function', 'must be a function').optional(),
    healthIntervalMs: ms.optional(),
    healthTimeoutMs: ms.optional(),
    failuresBeforeDown: z.number().int().min(1).optional(),
    clock: z.custom<Clock>(isClock, 'must be a Clock with now() and setTimer()').optional(),
  });
});

/**
 * Several gateways used as one: `GatewayKernel.start({ gateway: set })` and `new GatewayClient(set)` accept it wherever
 * one gateway goes. Each new kernel is placed on a healthy gateway (`options.place`, by default the one with the
 * fewest kernels); a start whose gateway cannot be reached or is at capacity moves on to the next candidate.
 *
 * While the set has kernels or starts, every gateway is checked each `healthIntervalMs` (`GET /api/kernels`, bounded
 * by `healthTimeoutMs`); a placement checks gateways whose last check is older than that first. A gateway that fails
 * `failuresBeforeDown` checks in a row is down: its kernels' handles fail at once with `GatewayDownError` naming it
 * (running cells settle, nothing hangs), new kernels skip it, and once it answers a check again it is used again (the
 * kernels failed on it are then deleted there, should they have survived). Call `close()` to stop the checks.
 */
export class GatewaySet implements GatewayRouter, Disposable {
  /** @internal */
  readonly [ROUTER] = true as const;
  readonly #members: Member[];
  readonly #place: PlaceKernel;
  readonly #intervalMs: number;
  readonly #timeoutMs: number;
  readonly #failuresBeforeDown: number;
  readonly #clock: Clock;
  readonly #events = new TypedEmitter<GatewaySetEventMap>();
  #timer: Timer | undefined;
  #closed = false;

  constructor(gateways: readonly (GatewayClient | GatewayClientOptions)[], options: GatewaySetOptions = {}) {
    const opts = parseOptions(optionsSchema(), options, 'GatewaySet options');
    if (!Array.isArray(gateways) || gateways.length === 0) {
      throw new InvalidOptionsError([{ path: 'gateways', message: 'must list at least one gateway' }], {
        subject: 'GatewaySet',
      });
    }
    this.#members = gateways.map((g, i) => {
      let client: GatewayClient;
      try {
        client = g instanceof GatewayClient ? g : new GatewayClient(g);
      } catch (error) {
        if (!InvalidOptionsError.isInstance(error)) throw error;
        const issues = error.issues.map((x) => ({
          path: `gateways.${i}${x.path ? `.${x.path}` : ''}`,
          message: x.message,
        }));
        throw new InvalidOptionsError(issues, { subject: 'GatewaySet', cause: error });
      }
      if (client.router) {
        throw new InvalidOptionsError([{ path: `gateways.${i}`, message: 'must be one gateway, not a set' }], {
          subject: 'GatewaySet',
        });
      }
      return {
        client,
        healthy: true,
        failures: 0,
        lastError: undefined,
        listed: undefined,
        checkedAt: Number.NEGATIVE_INFINITY,
        starting: 0,
        kernels: new Map(),
        lost: new Set(),
        checking: undefined,
      };
    });
    this.#place = opts.place ?? fewestKernels;
    this.#intervalMs = opts.healthIntervalMs ?? DEFAULT_HEALTH_INTERVAL_MS;
    this.#timeoutMs = opts.healthTimeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
    this.#failuresBeforeDown = opts.failuresBeforeDown ?? DEFAULT_FAILURES_BEFORE_DOWN;
    this.#clock = opts.clock ?? systemClock;
  }

  /** The gateways' clients, in the order given. */
  get gateways(): readonly GatewayClient[] {
    return this.#members.map((m) => m.client);
  }

  /** A label naming every gateway of the set, for messages. */
  get label(): string {
    return `gateway set [${this.#members.map((m) => m.client.baseUrl).join(', ')}]`;
  }

  /** What the set knows of each gateway, in the order given. */
  health(): GatewayHealth[] {
    return this.#members.map((m) => this.#health(m));
  }

  /** Subscribes to `gateway-down` / `gateway-up`; returns the unsubscribe function. */
  on<K extends keyof GatewaySetEventMap>(type: K, listener: (event: GatewaySetEventMap[K]) => void): () => void {
    return this.#events.on(type, listener);
  }

  /** Checks every gateway now (each bounded by `healthTimeoutMs`); resolves when all have answered or timed out. */
  async check(): Promise<void> {
    await Promise.all(this.#members.map((m) => this.#check(m)));
  }

  /**
   * The gateway for a new kernel: gateways whose last check is older than `healthIntervalMs` are checked first, then
   * `place` chooses among the healthy ones not in `exclude`. Throws `GatewayUnavailableError` when none is healthy
   * (or `place` refuses them all). The start that asked must call `settled(client)` once it has a kernel or failed.
   * @internal
   */
  async placeKernel(
    request: PlacementRequest,
    exclude: ReadonlySet<GatewayClient> = new Set(),
  ): Promise<GatewayClient> {
    const now = this.#clock.now();
    const stale = this.#members.filter((m) => !exclude.has(m.client) && now - m.checkedAt >= this.#intervalMs);
    await Promise.all(stale.map((m) => this.#check(m)));
    const candidates = this.#members.filter((m) => m.healthy && !exclude.has(m.client)).map((m) => this.#health(m));
    const chosen = candidates.length > 0 ? this.#place(candidates, request) : undefined;
    const client = chosen instanceof GatewayClient ? chosen : chosen?.client;
    const member = client ? this.#members.find((m) => m.client === client) : undefined;
    if (!member) {
      const down = this.#members.filter((m) => !m.healthy).map((m) => m.client.baseUrl);
      throw new GatewayUnavailableError(
        candidates.length === 0
          ? `No gateway of the ${this.label} can take a kernel${down.length ? ` (down: ${down.join(', ')})` : ''}${exclude.size ? ` (tried: ${[...exclude].map((c) => c.baseUrl).join(', ')})` : ''}`
          : `The placement of the ${this.label} chose no gateway among its healthy ones`,
        { url: this.label },
      );
    }
    member.starting++;
    this.#arm();
    return member.client;
  }

  /**
   * A start placed on `client` is over: with `kernel`, it runs there (counted, failed if the gateway goes down);
   * `failure` counts against the gateway's health when it could not be reached.
   * @internal
   */
  settled(client: GatewayClient, outcome: { kernel?: PlacedKernel; unreachable?: Error }): void {
    const member = this.#members.find((m) => m.client === client);
    if (!member) return;
    member.starting = Math.max(0, member.starting - 1);
    if (outcome.kernel) member.kernels.set(outcome.kernel.id, outcome.kernel);
    if (outcome.unreachable) this.#failed(member, outcome.unreachable);
    this.#arm();
  }

  /** The client of the gateway this set placed kernel `kernelId` on, if it did. @internal */
  clientFor(kernelId: string): GatewayClient | undefined {
    return this.#members.find((m) => m.kernels.has(kernelId))?.client;
  }

  /**
   * Records that a kernel runs on `client`: a kernel handle (one attached with `GatewayKernel.connect`), or the id of
   * one created through `new GatewayClient(set)` (counted until deleted through that client).
   * @internal
   */
  placed(client: GatewayClient, kernel: string | PlacedKernel): void {
    const member = this.#members.find((m) => m.client === client);
    if (!member) return;
    if (typeof kernel === 'string') {
      if (member.kernels.has(kernel)) return;
      member.kernels.set(kernel, { id: kernel, isAlive: () => true, gatewayDown: () => {} });
    } else {
      member.kernels.set(kernel.id, kernel);
    }
    this.#arm();
  }

  /** Forgets `kernelId` (deleted). @internal */
  forget(kernelId: string): void {
    for (const m of this.#members) m.kernels.delete(kernelId);
  }

  /** The healthy gateways' clients, in the order given. @internal */
  healthyClients(): GatewayClient[] {
    return this.#members.filter((m) => m.healthy).map((m) => m.client);
  }

  /** Stops the health checks (kernels keep running; a later placement starts them again). */
  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  [Symbol.dispose](): void {
    this.close();
  }

  #health(m: Member): GatewayHealth {
    this.#prune(m);
    // The listing is as old as the last check: kernels placed since are counted by this set.
    const known = Math.max(m.listed ?? 0, m.kernels.size);
    return {
      client: m.client,
      baseUrl: m.client.baseUrl,
      healthy: m.healthy,
      kernels: known + m.starting,
      failures: m.failures,
      lastError: m.lastError,
    };
  }

  #prune(m: Member): void {
    for (const [id, k] of m.kernels) if (!k.isAlive()) m.kernels.delete(id);
  }

  /** Keeps the periodic checks running while some gateway has kernels or starts, and the set is open. */
  #arm(): void {
    if (this.#closed && this.#timer === undefined) this.#closed = false;
    for (const m of this.#members) this.#prune(m);
    const busy = this.#members.some((m) => m.kernels.size > 0 || m.starting > 0);
    if (!busy) {
      this.#timer?.cancel();
      this.#timer = undefined;
      return;
    }
    if (this.#timer) return;
    this.#timer = this.#clock.setTimer(() => {
      this.#timer = undefined;
      void this.check().then(() => {
        if (!this.#closed) this.#arm();
      });
    }, this.#intervalMs);
  }

  #check(m: Member): Promise<void> {
    m.checking ??= (async () => {
      try {
        const kernels = await m.client.listKernels({ timeoutMs: this.#timeoutMs });
        m.listed = kernels.length;
        this.#answered(m);
      } catch (error) {
        const code = (error as { code?: unknown } | undefined)?.code;
        if (code === 'GATEWAY_UNAVAILABLE' || (error as Error | undefined)?.name === 'TimeoutError') {
          this.#failed(m, error as Error);
        } else {
          // It answered (listing refused, as an Enterprise Gateway may): up, counted by what this set placed there.
          m.listed = undefined;
          this.#answered(m);
        }
      } finally {
        m.checkedAt = this.#clock.now();
        m.checking = undefined;
      }
    })();
    return m.checking;
  }

  #answered(m: Member): void {
    m.failures = 0;
    m.lastError = undefined;
    if (m.healthy) return;
    m.healthy = true;
    const lost = [...m.lost];
    m.lost.clear();
    for (const id of lost) void m.client.deleteKernel(id, { timeoutMs: this.#timeoutMs }).catch(() => {});
    this.#events.emit('gateway-up', { baseUrl: m.client.baseUrl });
  }

  #failed(m: Member, error: Error): void {
    m.failures++;
    m.lastError = error;
    m.checkedAt = this.#clock.now();
    if (!m.healthy || m.failures < this.#failuresBeforeDown) return;
    m.healthy = false;
    m.listed = undefined;
    const lost: string[] = [];
    for (const [id, kernel] of m.kernels) {
      lost.push(id);
      m.lost.add(id);
      kernel.gatewayDown(error);
    }
    m.kernels.clear();
    this.#events.emit('gateway-down', { baseUrl: m.client.baseUrl, error, lostKernels: lost });
  }
}
