import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * A value built on first use: `lazy(build)` returns a function that calls `build` once, on its first call, and then
 * returns the same value. A `build` that throws is called again next time.
 *
 * Use it for what an import should not pay for (a validation schema, a table), so that importing a package stays
 * cheap and the cost lands on the first call that needs it.
 */
export function lazy<T>(build: () => T): () => T {
  let built = false;
  let value: T;
  return () => {
    if (!built) {
      value = build();
      built = true;
    }
    return value;
  };
}

/**
 * Defined (true) by a build that inlines the packages `lazyModule()` loads, such as the `kernelwarden` command's
 * single file: there the inlined copy of a package is the one to load, the one the build's static imports use.
 */
declare const __KERNELWARDEN_INLINED__: boolean | undefined;

type ExportTarget = string | { import?: ExportTarget; default?: ExportTarget; node?: ExportTarget } | undefined;

/** The file of `target` that `import` would load (the `node`, `import`, then `default` condition). */
function importTarget(target: ExportTarget): string | undefined {
  if (typeof target === 'string') return target;
  if (!target || typeof target !== 'object') return undefined;
  return importTarget(target.node) ?? importTarget(target.import) ?? importTarget(target.default);
}

/** `zod/v3` → `['zod', './v3']`; `@scope/name/sub` → `['@scope/name', './sub']`; a bare name → `[name, '.']`. */
function splitSpecifier(specifier: string): [string, string] {
  const parts = specifier.split('/');
  const nameLength = specifier.startsWith('@') ? 2 : 1;
  const rest = parts.slice(nameLength).join('/');
  return [parts.slice(0, nameLength).join('/'), rest === '' ? '.' : `./${rest}`];
}

/**
 * The file `import(specifier)` loads, for a package whose ES module entry is not its CommonJS one (zod ships both):
 * loading that file with `require()` gives the very module instance a static `import` gets elsewhere, instead of a
 * second copy. Undefined for a CommonJS-only package (its `require()` entry is the one `import` wraps too). A subpath
 * (`zod/v3`) is looked up in the package's `exports`.
 */
function esModuleEntry(require: NodeJS.Require, specifier: string): string | undefined {
  const [name, subpath] = splitSpecifier(specifier);
  let manifestPath: string;
  try {
    manifestPath = require.resolve(`${name}/package.json`);
  } catch {
    return undefined;
  }
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as {
    type?: string;
    exports?: Record<string, ExportTarget> | ExportTarget;
  };
  if (manifest.type !== 'module') return undefined;
  const exportsMap = manifest.exports;
  const target =
    exportsMap && typeof exportsMap === 'object' && ('.' in exportsMap || subpath in exportsMap)
      ? (exportsMap as Record<string, ExportTarget>)[subpath]
      : subpath === '.'
        ? (exportsMap as ExportTarget)
        : undefined;
  const entry = importTarget(target);
  return entry === undefined ? undefined : join(dirname(manifestPath), entry);
}

/**
 * A dependency loaded synchronously on first use: `lazyModule('zod', import.meta.url, () => require('zod'))` returns
 * a function that resolves the package from the calling module's location and loads it the first time it is called
 * (Node >= 20.19 `require()`s ES modules; the ES module entry is the one loaded, so the instance is the one `import`
 * shares).
 *
 * `bundled` is for an application bundled into one file, where the package is not on disk: write it as a call of
 * `require` with the literal name, which a bundler replaces by the bundled module (evaluated on that first call); it
 * is only called when the package cannot be resolved from `parentUrl`, or first, in a build that defines
 * `__KERNELWARDEN_INLINED__` as true (one that inlines every package, so that the inlined copy is used even where the
 * package is on disk too).
 *
 * Use it for a heavy dependency that only some calls need — a validation library, a WebSocket implementation — so
 * that importing the package that depends on it does not load it.
 */
export function lazyModule<T>(specifier: string, parentUrl: string, bundled?: () => T): () => T {
  return lazy(() => {
    if (bundled && typeof __KERNELWARDEN_INLINED__ !== 'undefined' && __KERNELWARDEN_INLINED__) return bundled();
    const require = createRequire(parentUrl);
    let path: string;
    try {
      path = esModuleEntry(require, specifier) ?? require.resolve(specifier);
    } catch (error) {
      if (bundled && (error as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') return bundled();
      throw error;
    }
    return require(path) as T;
  });
}
