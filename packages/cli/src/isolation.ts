import { lazyModule } from '@kernelwarden/core';
import type * as Isolation from '@kernelwarden/isolation';

/**
 * `@kernelwarden/isolation`, loaded the first time a command needs it (`--hide`, a limit flag, an isolation error to
 * build): a command without them does not pay for loading it.
 */
// The literal require() is what a bundler inlines for an application bundled into one file (see lazyModule).
export const isolation = lazyModule<typeof Isolation>('@kernelwarden/isolation', import.meta.url, () =>
  require('@kernelwarden/isolation'),
);
