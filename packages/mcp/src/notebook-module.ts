import { lazyModule } from '@kernelwarden/core';
import type * as Notebook from '@kernelwarden/notebook';

/**
 * `@kernelwarden/notebook`, loaded the first time `run_notebook` or `save_notebook` runs: a server whose client never
 * calls them does not pay for loading it.
 */
// The literal require() is what a bundler inlines for an application bundled into one file (see lazyModule).
export const notebookModule = lazyModule<typeof Notebook>('@kernelwarden/notebook', import.meta.url, () =>
  require('@kernelwarden/notebook'),
);
