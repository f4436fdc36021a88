export type { Clock, Timer } from './clock.js';
export { isClock, sleep, systemClock } from './clock.js';
export type { AbortScope, DeadlineOptions } from './deadline.js';
export { abortScope, effectiveTimeout, raceSignal, withDeadline } from './deadline.js';
export type { KernelwardenErrorOptions } from './errors.js';
export { DeadlineExceededError, InvalidOptionsError, isTimeoutError, KernelwardenError } from './errors.js';
export type { OptionsIssue, OptionsSchema } from './options.js';
export { parseOptions } from './options.js';
export type {
  ExecuteError,
  ExecuteOptions,
  ExecuteResult,
  InputRequest,
  KernelHandle,
  Output,
  ReadIsolationPolicy,
} from './types.js';
