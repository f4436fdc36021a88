export type { BackgroundPeek } from './background.js';
export {
  BackgroundCellError,
  BootstrapError,
  BuildCancelledError,
  ClosedError,
  KernelFactoryError,
  KernelRestartError,
  NoKernelError,
  SessionStoppedError,
} from './errors.js';
export type { Unsubscribe } from './events.js';
export type { CellExecutor, CellRunRequest } from './executor.js';
export { plainExecutor } from './executor.js';
export type { LanguageSlot, LanguageSlotContext } from './language-slot.js';
export type { EndedReason, Lease, SlotStatus, SupervisedKernel } from './lease.js';
export type { WarmPoolOptions } from './pool.js';
export type {
  BootstrapContext,
  KernelSessionOptions,
  KernelStatus,
  KernelStatusEvent,
  SessionExecuteOptions,
  SessionStatus,
  SlotFactory,
  SlotFactoryContext,
} from './session.js';
export { KernelSession, PYTHON_SLOT } from './session.js';
export type {
  AcquireResult,
  BuildContext,
  EnsureOptions,
  KernelFactory,
  KernelSupervisorOptions,
  SlotHold,
  StopOptions,
  SupervisorEvent,
  WaitOptions,
} from './supervisor.js';
export { KernelSupervisor } from './supervisor.js';
