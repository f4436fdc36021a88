import { packageConfig } from '../../tsup.base';

// `os` is a subpath of its own (`@kernelwarden/core/os`, Linux's /proc): the main entry never loads it.
export default packageConfig({ entry: { index: 'src/index.ts', os: 'src/os.ts' } });
