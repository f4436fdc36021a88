import { getEventListeners } from 'node:events';
import { KernelSupervisor } from '@kernelwarden/supervisor';
import { ManualClock, RecordingKernel } from '@kernelwarden/testkit';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CellTimeoutError, createWatchdog, type WatchdogEvent } from './index.js';

const BUDGET = 10_000;
const INTERRUPT_GRACE = 1_000;
const KILL_GRACE = 2_000;
const KILL_TIMEOUT = 5_000;
const HORIZON = 100_000;

/** How the kernel and the world behave during one cell. */
const scenario = fc.record({
  /** The interrupt stops the cell. */
  interruptWorks: fc.boolean(),
  /** The interrupt request reports delivery. */
  interruptDelivered: fc.boolean(),
  /** The kill settles the running cell (else the cell is wedged for good). */
  killSettles: fc.boolean(),
  restartFails: fc.boolean(),
  bootstrapFails: fc.boolean(),
  /** The cell finishes by itself at this time, if ever. */
  finishAt: fc.option(fc.integer({ min: 1, max: 20_000 }), { nil: undefined }),
  /** The caller aborts at this time, if ever. */
  abortAt: fc.option(fc.integer({ min: 1, max: 20_000 }), { nil: undefined }),
  /** The slot gets a newer kernel (another environment) at this time, if ever. */
  replaceAt: fc.option(fc.integer({ min: 1, max: 20_000 }), { nil: undefined }),
});

const LADDER = ['interrupt', 'kill', 'restart', 'bootstrap'];

describe('createWatchdog under any interleaving (model-based)', () => {
  it('takes each step at most once, in ladder order, never touches a newer kernel, and leaves nothing behind', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const clock = new ManualClock();
        const supervisor = new KernelSupervisor<RecordingKernel>({ clock });
        const kernel = new RecordingKernel('python', { hold: true, releaseOnInterrupt: s.interruptWorks });
        if (!s.interruptDelivered) {
          kernel.interrupt = async () => {
            kernel.interruptCalls++;
            return { delivered: false };
          };
        }
        if (!s.killSettles) {
          kernel.kill = async () => {
            kernel.killCalls++;
          };
        }
        if (s.restartFails) {
          kernel.restart = async () => {
            kernel.restartCalls++;
            throw new Error('restart failed');
          };
        }
        // A replaced kernel's shutdown does not settle its cell: the ladder must cope on its own.
        kernel.shutdown = async () => {
          kernel.shutdownCalls++;
          kernel.live = false;
          return { confirmed: true };
        };
        const first = await supervisor.ensure('python', 'base', () => kernel);
        const newer = new RecordingKernel('newer');

        const watchdog = createWatchdog({
          cellTimeoutMs: BUDGET,
          interruptGraceMs: INTERRUPT_GRACE,
          killGraceMs: KILL_GRACE,
          killTimeoutMs: KILL_TIMEOUT,
          clock,
        });
        const rungs: WatchdogEvent[] = [];
        watchdog.on('*', (event) => rungs.push(event));
        const bootstraps: number[] = [];
        const controller = new AbortController();
        const reason = new Error('caller gave up');

        const outcome = watchdog
          .run({
            supervisor,
            slot: 'python',
            code: 'cell()',
            signal: controller.signal,
            bootstrap: async (lease) => {
              bootstraps.push(lease.generation);
              if (s.bootstrapFails) throw new Error('bootstrap failed');
            },
          })
          .then(
            (value) => ({ value, error: undefined as unknown }),
            (error: unknown) => ({ value: undefined, error }),
          );
        await kernel.executeEntered.wait();
        if (s.finishAt !== undefined) clock.setTimer(() => kernel.executeRelease.open(), s.finishAt);
        if (s.abortAt !== undefined) clock.setTimer(() => controller.abort(reason), s.abortAt);
        if (s.replaceAt !== undefined) {
          clock.setTimer(() => void supervisor.ensure('python', 'other', () => newer), s.replaceAt);
        }
        await clock.advance(HORIZON);
        const { value, error } = await outcome;

        // Each step at most once, in ladder order (abandon ends it after the kill).
        const types = rungs.map((r) => r.type);
        const expected = types.includes('abandon') ? ['interrupt', 'kill', 'abandon'] : LADDER.slice(0, types.length);
        expect(types).toEqual(expected);
        expect(kernel.restartCalls).toBeLessThanOrEqual(1);
        expect(bootstraps.length).toBeLessThanOrEqual(1);
        // Exact-lease steps: the newer kernel is never touched, and every rung names the cell's own lease (or,
        // for bootstrap, the lease its restart produced).
        expect([newer.interruptCalls, newer.killCalls, newer.restartCalls, newer.shutdownCalls]).toEqual([0, 0, 0, 0]);
        for (const rung of rungs) {
          if (rung.type === 'bootstrap') expect(rung.generation).toBe(first.generation + 1);
          else expect([rung.leaseId, rung.generation]).toEqual([first.id, first.generation]);
        }
        // Nothing left behind.
        expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
        expect(clock.pendingTimers()).toBe(0);

        if (value) {
          // A result means nothing was reset.
          expect(types).not.toContain('restart');
          expect(kernel.restartCalls).toBe(0);
        } else if (CellTimeoutError.isInstance(error)) {
          expect(controller.signal.aborted && rungs[0]?.reason === 'cancelled').toBe(false);
          // The slot holds the reset kernel, nothing (shut down), or a kernel someone put there later.
          const lease = supervisor.lease('python');
          const laterKernel = lease?.kernel === newer;
          if (error.code === 'CELL_TIMEOUT') {
            expect(rungs.find((r) => r.type === 'restart')?.replacement?.generation).toBe(first.generation + 1);
            expect(bootstraps).toEqual([first.generation + 1]);
            if (!laterKernel) {
              expect(lease?.kernel).toBe(kernel);
              expect(lease?.generation).toBe(first.generation + 1);
            }
          } else if (error.code !== 'CELL_TIMEOUT_LEASE_REPLACED' && !laterKernel) {
            expect(lease).toBeUndefined();
          }
        } else {
          // Only a caller's abort rejects with anything else, and then with its own reason.
          expect(error).toBe(reason);
          expect(rungs[0]?.reason).toBe('cancelled');
        }
      }),
      { numRuns: 300 },
    );
  });
});
