import type { ExecuteOptions, ExecuteResult, Output } from '@kernelwarden/core';

// The part of @kernelwarden/supervisor's API the watchdog drives, declared structurally until the supervisor's own
// types build; the real KernelSupervisor satisfies it.

/** The kernel subset the ladder needs. */
export interface WatchedKernel {
  readonly id: string;
  isAlive(): boolean;
  execute?(code: string, opts?: ExecuteOptions): Promise<ExecuteResult>;
}

/** An exact lease: a slot's kernel at one generation. */
export interface WatchedLease<K = WatchedKernel> {
  slot: string;
  key: string;
  generation: number;
  id: string;
  kernel: K;
}

/** The exact-lease operations of a `KernelSupervisor`. */
export interface WatchedSupervisor {
  lease(slot: string): WatchedLease<any> | undefined;
  interruptIfCurrent(lease: WatchedLease<any>): boolean | Promise<boolean>;
  killIfCurrent(lease: WatchedLease<any>): boolean | Promise<boolean>;
  restartIfCurrent(lease: WatchedLease<any>): Promise<WatchedLease<any> | undefined>;
  shutdownIfCurrent(lease: WatchedLease<any>, reason: string): boolean | Promise<boolean>;
}

/** One cell to run (the supervisor's `CellRunRequest`). */
export interface CellRunRequest {
  supervisor: WatchedSupervisor;
  slot: string;
  code: string;
  lease?: WatchedLease<any>;
  cellId?: string;
  origin?: string;
  onOutput?: (output: Output) => void;
  onInput?: ExecuteOptions['onInput'];
  signal?: AbortSignal;
  bootstrap?: (lease: WatchedLease<any>) => Promise<void>;
}

/** Runs cells for a session (the supervisor's `CellExecutor`). */
export interface CellExecutor {
  run(req: CellRunRequest): Promise<ExecuteResult>;
}
