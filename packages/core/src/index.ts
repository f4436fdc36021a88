export { abortCallbacks, onAbort } from './abort-relay.js';
export { stripAnsi } from './ansi.js';
export type { WriteFileAtomicOptions } from './atomic-file.js';
export { writeFileAtomic } from './atomic-file.js';
export type { Clock, Timer } from './clock.js';
export { isClock, sleep, systemClock } from './clock.js';
export type { AbortScope, DeadlineOptions } from './deadline.js';
export { abortScope, effectiveTimeout, raceSignal, withDeadline } from './deadline.js';
export type { KernelwardenErrorOptions } from './errors.js';
export { DeadlineExceededError, InvalidOptionsError, isTimeoutError, KernelwardenError } from './errors.js';
export type { EventMapOf, Listener, Unsubscribe } from './events.js';
export { TypedEmitter } from './events.js';
export { lazy, lazyModule } from './lazy.js';
export type { OptionsSchema, OptionsSchemaIssue, ParseOptionsContext } from './options.js';
export { parseOptions } from './options.js';
export { emptyResult } from './result.js';
export type {
  ExecuteError,
  ExecuteOptions,
  ExecuteResult,
  InputRequest,
  KernelHandle,
  KillOutcome,
  Output,
  ReadIsolationPolicy,
} from './types.js';
