import { packageConfig } from '../../tsup.base';

// The linger watcher is a program of its own, spawned by the library from the same dist directory; only the library
// has types.
export default packageConfig({
  entry: ['src/index.ts', 'src/linger-watcher-main.ts'],
  dts: { entry: 'src/index.ts' },
});
