import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { build, type Options } from 'tsup';
import { packageConfig } from '../../tsup.base';

const packagesDir = fileURLToPath(new URL('..', import.meta.url));

/**
 * `@kernelwarden/<name>` → that package's sources, and each subpath it exports (`@kernelwarden/core/os`) → its
 * `src/<subpath>.ts`: the bundle is built from them, as one program.
 */
function workspaceSources(): Record<string, string> {
  const alias: Record<string, string> = {};
  for (const name of readdirSync(packagesDir)) {
    if (name === 'cli') continue;
    alias[`@kernelwarden/${name}`] = `${packagesDir}${name}/src/index.ts`;
    for (const subpath of sourceSubpaths(name)) {
      alias[`@kernelwarden/${name}/${subpath}`] = `${packagesDir}${name}/src/${subpath}.ts`;
    }
  }
  return alias;
}

/** The subpaths package `name` exports that are built from a source file of that name (`./os` → `src/os.ts`). */
function sourceSubpaths(name: string): string[] {
  let exported: Record<string, unknown>;
  try {
    exported = JSON.parse(readFileSync(`${packagesDir}${name}/package.json`, 'utf8')).exports ?? {};
  } catch {
    return [];
  }
  return Object.keys(exported)
    .map((key) => key.replace(/^\.\//, ''))
    .filter((sub) => sub !== '.' && existsSync(`${packagesDir}${name}/src/${sub}.ts`));
}

/**
 * Every `zod/v3` of the bundle is zod's CommonJS build, the one the packages' lazy `require('zod/v3')` inlines: a
 * static `import` would otherwise inline its ES build beside it, and a command would build zod twice (~2 ms).
 */
const oneZod = {
  name: 'one-zod',
  setup(build: { onResolve(opts: { filter: RegExp }, cb: () => { path: string }): void }) {
    const file = createRequire(import.meta.url).resolve('zod/v3');
    build.onResolve({ filter: /^zod\/v3$/ }, () => ({ path: file }));
  },
};

/** What both CommonJS files of `dist/` are built with: `.cjs` files for Node.js 20, beside the ES build. */
const commonJs: Options = {
  format: ['cjs'],
  platform: 'node',
  target: 'node20',
  tsconfig: 'tsconfig.build.json',
  shims: true,
  sourcemap: true,
  dts: false,
  clean: false,
  outExtension: () => ({ js: '.cjs' }),
};

/**
 * `dist/kernelwarden.cjs`: the command line with every package it uses inlined, in one CommonJS file that `bin.cjs`
 * runs with V8's compile cache (Node.js 20 caches no ES module). The packages' lazily loaded dependencies (zod, ws,
 * the isolation package) are inlined too, and still load on first use.
 */
const bundle: Options = {
  ...commonJs,
  entry: { kernelwarden: 'src/cli-bundle.ts' },
  noExternal: [/.*/],
  splitting: false,
  // Smaller to read and to cache; names kept, for error names and stack traces.
  minify: true,
  keepNames: true,
  // The packages' lazily loaded dependencies come from the bundle too, not from node_modules (see lazyModule).
  define: { __KERNELWARDEN_INLINED__: 'true' },
  esbuildOptions(options) {
    options.alias = workspaceSources();
    // Pure ASCII: Node reads it into a one-byte string without decoding UTF-8.
    options.charset = 'ascii';
  },
  esbuildPlugins: [oneZod],
};

/**
 * `dist/bin.cjs`, the `kernelwarden` command: CommonJS, so that it starts without Node's ES module loader; it runs
 * the bundle with the compile cache.
 */
const bin: Options = {
  ...commonJs,
  entry: { bin: 'src/bin.ts' },
  // core's `writeFileAtomic`, inlined from its sources: core is ES modules only, and this file loads no package.
  noExternal: ['@kernelwarden/core'],
  esbuildOptions(options) {
    options.alias = workspaceSources();
  },
};

export default packageConfig({
  entry: { index: 'src/index.ts' },
  // After the ES build (which cleans dist/), so that they never race.
  onSuccess: async () => {
    await Promise.all([
      build({ ...bundle, config: false, silent: true }),
      build({ ...bin, config: false, silent: true }),
    ]);
  },
});
