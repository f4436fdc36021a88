export type { BackgroundPeek } from './background.js';
export {
  BackgroundCellError,
  BootstrapError,
  BuildCancelledError,
  ClosedError,
  KernelFactoryError,
  KernelRestartError,
  KernelUnavailableError,
  NoKernelError,
  SessionStoppedError,
  UnknownLanguageError,
} from './errors.js';
export type { Unsubscribe } from './events.js';
export type { CellExecutor, CellRunRequest } from './executor.js';
export { plainExecutor } from './executor.js';
export type { LanguageSlot, LanguageSlotContext, LanguageSlotStatus } from './language-slot.js';
export type {
  LanguageSlotOptions,
  ResolvedLanguageSlotOptions,
  SlotSpawnContext,
} from './language-slot-options.js';
export { resolveLanguageSlotOptions } from './language-slot-options.js';
export { createLanguageSlot } from './lazy-language-slot.js';
export type { EndedReason, Lease, SlotStatus, SupervisedKernel } from './lease.js';
export { KernelSession } from './session.js';
export type {
  BootstrapContext,
  KernelSessionOptions,
  ResolvedSessionOptions,
  SlotFactory,
  SlotFactoryContext,
} from './session-options.js';
export {
  DEFAULT_MAX_BACKGROUND,
  DEFAULT_MAX_PEEK_CHARS,
  DEFAULT_SPARES_SIZE,
  PYTHON_SLOT,
  resolveSessionOptions,
} from './session-options.js';
export type {
  KernelStatus,
  KernelStatusEvent,
  SessionExecuteOptions,
  SessionLanguage,
  SessionStatus,
} from './session-status.js';
export type {
  AcquireResult,
  BuildContext,
  EnsureOptions,
  KernelFactory,
  SlotHold,
  SlotSupervisor,
  StopOptions,
  SupervisorEvent,
  WaitOptions,
} from './slot-supervisor.js';
export type { SparesOptions, SparesStatus } from './spare-set.js';
export { KernelSupervisor } from './supervisor.js';
export type { KernelSupervisorOptions, ResolvedSupervisorOptions } from './supervisor-options.js';
export {
  DEFAULT_IDLE_TTL_MS,
  DEFAULT_SHUTDOWN_TIMEOUT_MS,
  resolveSupervisorOptions,
} from './supervisor-options.js';
