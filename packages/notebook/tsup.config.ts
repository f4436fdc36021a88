import { packageConfig } from '../../tsup.base';

export default packageConfig({ entry: ['src/index.ts'] });
