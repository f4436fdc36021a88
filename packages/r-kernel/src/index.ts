export type { IRKernelStartOptions } from './ir-kernel.js';
export { R_INTERRUPTED, startIRKernel } from './ir-kernel.js';
export type { RSlot, RSlotOptions, RSlotStatus, RSpawnContext } from './r-slot.js';
export { createRSlot, R_SLOT } from './r-slot.js';
