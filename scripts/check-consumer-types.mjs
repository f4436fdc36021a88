#!/usr/bin/env node
// Type-checks every published package as a strict consumer sees it: each package is packed (`pnpm pack`, the
// tarball npm would publish) and installed on its own into a temporary consumer directory, offline, in pnpm's
// isolated layout: the package beside exactly the dependencies its packed manifest declares — the other
// @kernelwarden packages from their tarballs (laid out the same way), everything else from the workspace's own install
// (node_modules/.pnpm) — and nothing hoisted. The consumer imports each entry point from an ES module, and `tsc`
// checks it with `strict`, without `skipLibCheck`, once with `moduleResolution: node16` and once with `bundler`. A
// `.d.ts` that imports a package its manifest does not bring (TS2307), or one without types (TS7016: `ws` without
// `@types/ws`), fails the check.
//
// The consumer has what a Node.js TypeScript project has: `@types/node` (and `vitest` for testkit's `./vitest`
// entry, whose peer it is). Optional peers are not installed: a package's types must not need one.
//
// Needs the packages built (`pnpm check:packages` builds first) and the workspace installed.
// KW_CONSUMER_KEEP=1 keeps the temporary directory and prints it.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const bin = (name) => join(root, 'node_modules', '.bin', name);

/** The consumer's own packages besides the one under test: what a Node.js TypeScript project installs itself. */
const CONSUMER_DEPS = ['@types/node'];
/** Extra consumer packages for one entry point (the peer that entry is for). */
const ENTRY_DEPS = { '@kernelwarden/testkit/vitest': ['vitest'] };
/** Extra `lib`s of a package's consumer, and why. */
const EXTRA_LIBS = {
  // The MCP SDK's types name fetch's `HeadersInit`, which only the DOM lib declares.
  '@kernelwarden/mcp': ['DOM'],
};
const RESOLUTIONS = [
  { moduleResolution: 'node16', module: 'node16' },
  { moduleResolution: 'bundler', module: 'esnext' },
];

const packages = readdirSync(join(root, 'packages'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => {
    const dir = join(root, 'packages', entry.name);
    return { dir, manifest: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) };
  })
  .filter(({ manifest }) => !manifest.private);

const work = mkdtempSync(join(tmpdir(), 'kw-consumer-types-'));

/** Links `target` as `node_modules/<name>` in `nodeModules`. */
function link(nodeModules, name, target) {
  const path = join(nodeModules, name);
  mkdirSync(dirname(path), { recursive: true });
  symlinkSync(target, path, 'dir');
}

/** A third-party package as the workspace installed it for `from` (a package directory), or undefined. */
function installed(from, name) {
  const path = join(from, 'node_modules', name);
  return existsSync(path) ? realpathSync(path) : undefined;
}

let failures = 0;
const fail = (message) => {
  failures++;
  process.stderr.write(`✗ ${message}\n`);
};
try {
  // Pack every package, unpack it into its own `<store>/<name>/node_modules/<name>`.
  const unpacked = new Map();
  for (const { dir, manifest } of packages) {
    const out = execFileSync(bin('pnpm'), ['pack', '--json', '--pack-destination', join(work, 'tarballs')], {
      cwd: dir,
      encoding: 'utf8',
    });
    const siblings = join(work, 'store', manifest.name.replace('/', '+'), 'node_modules');
    const target = join(siblings, manifest.name);
    mkdirSync(target, { recursive: true });
    execFileSync('tar', ['-xzf', JSON.parse(out).filename, '-C', target, '--strip-components=1']);
    unpacked.set(manifest.name, { dir, siblings, target });
  }
  // Each unpacked package's dependencies beside it, as pnpm lays them out: exactly what its packed manifest declares.
  for (const [name, { dir, siblings, target }] of unpacked) {
    const packed = JSON.parse(readFileSync(join(target, 'package.json'), 'utf8'));
    for (const dep of Object.keys(packed.dependencies ?? {})) {
      const source = unpacked.get(dep)?.target ?? installed(dir, dep);
      if (source === undefined) fail(`${name}: dependency ${dep} is not installed in the workspace (pnpm install)`);
      else link(siblings, dep, source);
    }
  }

  for (const { manifest } of packages) {
    const entries = Object.keys(manifest.exports ?? { '.': {} })
      .filter((key) => key !== './package.json')
      .map((key) => (key === '.' ? manifest.name : `${manifest.name}/${key.slice(2)}`));
    const consumer = join(work, 'consumers', manifest.name.replace('/', '+'));
    const nodeModules = join(consumer, 'node_modules');
    link(nodeModules, manifest.name, unpacked.get(manifest.name).target);
    for (const dep of [...CONSUMER_DEPS, ...entries.flatMap((entry) => ENTRY_DEPS[entry] ?? [])]) {
      const source = installed(root, dep);
      if (source === undefined) {
        fail(`the workspace has no ${dep} for the consumer of ${manifest.name}`);
        continue;
      }
      link(nodeModules, dep, source);
      // A peer the consumer has is beside the package too, as pnpm resolves it.
      if (manifest.peerDependencies?.[dep]) link(unpacked.get(manifest.name).siblings, dep, source);
    }
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    writeFileSync(
      join(consumer, 'index.ts'),
      `${entries.map((entry, i) => `import * as entry${i} from '${entry}';`).join('\n')}\n` +
        `export type Entries = [${entries.map((_, i) => `typeof entry${i}`).join(', ')}];\n`,
    );
    for (const { moduleResolution, module } of RESOLUTIONS) {
      const config = `tsconfig.${moduleResolution}.json`;
      writeFileSync(
        join(consumer, config),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            skipLibCheck: false,
            noEmit: true,
            target: 'ES2022',
            lib: ['ES2023', 'ESNext.Disposable', ...(EXTRA_LIBS[manifest.name] ?? [])],
            module,
            moduleResolution,
            types: ['node'],
          },
          files: ['index.ts'],
        }),
      );
      const tsc = spawnSync(bin('tsc'), ['--project', config], { cwd: consumer, encoding: 'utf8' });
      if (tsc.status === 0) process.stdout.write(`✓ ${entries.join(', ')} (${moduleResolution})\n`);
      else fail(`${entries.join(', ')} (${moduleResolution}):\n${tsc.stdout}${tsc.stderr}`);
    }
  }
} finally {
  if (process.env.KW_CONSUMER_KEEP === '1') process.stdout.write(`kept ${work}\n`);
  else rmSync(work, { recursive: true, force: true });
}
if (failures > 0) {
  process.stderr.write(`${failures} consumer type check(s) failed\n`);
  process.exit(1);
}
