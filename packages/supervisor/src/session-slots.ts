import type { ExecuteOptions, ExecuteResult } from '@kernelwarden/core';
import { unavailableResult } from './cell-results.js';
import { KernelUnavailableError, UnknownLanguageError } from './errors.js';
import {
  type LanguageSlot,
  type LanguageSlotContext,
  type LanguageSlotStatus,
  slotLabel,
  unavailableName,
} from './language-slot.js';
import type { SupervisedKernel } from './lease.js';
import type { Turn } from './session-intents.js';
import { PYTHON_SLOT, type ResolvedSessionOptions } from './session-options.js';
import type { KernelSupervisor } from './supervisor.js';

/**
 * A session's language slots by name (`r`, `julia`, …), each with its environment: routing a cell to its slot,
 * turning a soft failure into a `KernelUnavailableError` result, shutting them all down, and their statuses.
 *
 * Internal to `KernelSession`; the Python slot is not one of them.
 */
export class SessionSlots<K extends SupervisedKernel, H> {
  readonly #slots: ReadonlyMap<string, LanguageSlot<SupervisedKernel, H>>;
  readonly #envs: Map<string, string | undefined>;
  readonly #supervisor: KernelSupervisor<K>;
  readonly #options: ResolvedSessionOptions<K, H>;
  readonly #host: () => H;

  constructor(supervisor: KernelSupervisor<K>, options: ResolvedSessionOptions<K, H>, host: () => H) {
    this.#supervisor = supervisor;
    this.#options = options;
    this.#slots = options.slots;
    this.#envs = new Map(options.slotEnvs);
    this.#host = host;
  }

  /** Every language the session runs, Python first. */
  languages(): string[] {
    return [PYTHON_SLOT, ...this.#slots.keys()];
  }

  /** The slot of `language`; throws `UnknownLanguageError` when the session has none. */
  get(language: string): LanguageSlot<SupervisedKernel, H> {
    const slot = this.#slots.get(language);
    if (!slot) throw new UnknownLanguageError(language, this.languages());
    return slot;
  }

  /** Records the environment of `language`'s slot; the slot replaces its kernel lazily, on its next cell. */
  setEnv(language: string, env: string | undefined): void {
    this.#envs.set(language, env);
  }

  /**
   * Runs one cell on the slot of `language`: makes sure its kernel is ready (a soft failure becomes a
   * `KernelUnavailableError` result; a stop or the caller's abort while it starts rejects with the turn's reason),
   * then runs it through the slot.
   */
  async execute(
    language: string,
    code: string,
    opts: Pick<ExecuteOptions, 'cellId' | 'origin' | 'onOutput' | 'onInput'>,
    turn: Turn,
  ): Promise<ExecuteResult> {
    const slot = this.get(language);
    const { signal } = turn;
    const ctx = this.#context(language, turn);
    const hold = this.#supervisor.hold(slot.language);
    try {
      let failure: string | null;
      try {
        failure = await slot.ensure(ctx);
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        failure = `${slotLabel(slot)} kernel unavailable: ${error instanceof Error ? error.message : String(error)}`;
      }
      // A stop (or the caller) cancelled the cell while the kernel was starting: a cancelled cell, not a failure.
      if (signal.aborted) throw signal.reason;
      if (typeof failure === 'string') {
        const error = new KernelUnavailableError(slot.language, unavailableName(slot), failure);
        return unavailableResult(error, opts.cellId);
      }
      return await slot.execute(code, { signal, ...opts }, ctx);
    } finally {
      hold.release();
    }
  }

  /** Shuts every slot's kernel down, one after the other; a slot that fails to is passed over. */
  async shutdownAll(reason: string): Promise<void> {
    for (const slot of this.#slots.values()) await slot.shutdown(reason).catch(() => undefined);
  }

  /** Each slot's status, by name. */
  statuses(): Record<string, LanguageSlotStatus> {
    const out: Record<string, LanguageSlotStatus> = {};
    for (const [language, slot] of this.#slots) out[language] = slot.status();
    return out;
  }

  #context(language: string, turn: Turn): LanguageSlotContext<H> {
    const ctx: LanguageSlotContext<H> = {
      supervisor: this.#supervisor,
      env: this.#envs.get(language),
      executor: this.#options.executor,
      host: this.#host(),
      signal: turn.signal,
      stopSignal: turn.stopSignal,
    };
    if (this.#options.cwd !== undefined) ctx.cwd = this.#options.cwd;
    if (this.#options.readIsolation !== undefined) ctx.readIsolation = this.#options.readIsolation;
    return ctx;
  }
}
