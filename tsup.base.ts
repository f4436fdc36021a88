import { defineConfig, type Options } from 'tsup';

/**
 * The build every published package shares: ESM for Node.js 20 with bundled `.d.ts` and source maps, from the
 * package's `tsconfig.build.json`. A package's `tsup.config.ts` names its entries and nothing else it need not.
 */
export function packageConfig(options: Pick<Options, 'entry'> & Options): ReturnType<typeof defineConfig> {
  return defineConfig({
    format: ['esm'],
    dts: true,
    sourcemap: true,
    clean: true,
    platform: 'node',
    target: 'node20',
    tsconfig: 'tsconfig.build.json',
    ...options,
  });
}
