import { lazyModule } from '@kernelwarden/core';
import type * as Notebook from '@kernelwarden/notebook';

/** `@kernelwarden/notebook`, loaded when `run` is given a notebook: a script's run does not load it. */
// The literal require() is what a bundler inlines for an application bundled into one file (see lazyModule).
export const notebookModule = lazyModule<typeof Notebook>('@kernelwarden/notebook', import.meta.url, () =>
  require('@kernelwarden/notebook'),
);
