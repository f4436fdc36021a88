export type { IRKernelStartOptions, ResolvedIRKernelStartOptions } from './ir-kernel.js';
export {
  DEFAULT_IR_KERNEL_NAME,
  DEFAULT_IR_SHUTDOWN_TIMEOUT_MS,
  DEFAULT_PROCESS_EXIT_TIMEOUT_MS,
  R_INTERRUPTED,
  resolveIRKernelOptions,
  startIRKernel,
} from './ir-kernel.js';
export type { RSlot, RSlotOptions, RSlotStatus, RSpawnContext } from './r-slot.js';
export { createRSlot, R_SLOT, R_UNAVAILABLE_NAME } from './r-slot.js';
