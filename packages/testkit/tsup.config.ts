import { packageConfig } from '../../tsup.base';

// The runner glue in ./vitest imports vitest at run time; it is the user's dependency, never bundled.
export default packageConfig({ entry: ['src/index.ts', 'src/vitest.ts'], external: ['vitest'] });
