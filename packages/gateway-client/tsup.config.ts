import { packageConfig } from '../../tsup.base';

// The create guard is a program of its own, spawned by the library from the same dist directory; only the library
// has types.
export default packageConfig({
  entry: ['src/index.ts', 'src/create-guard-main.ts'],
  dts: { entry: 'src/index.ts' },
});
