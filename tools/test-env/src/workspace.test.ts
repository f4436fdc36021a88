import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

// Rules over all packages at once: no dependency cycle between them, and one way to use zod.

const root = new URL('../../../', import.meta.url).pathname;

interface Manifest {
  name: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

const projects = [
  ...readdirSync(join(root, 'packages')).map((name) => join(root, 'packages', name)),
  ...readdirSync(join(root, 'tools')).map((name) => join(root, 'tools', name)),
].map((dir) => ({ dir, manifest: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest }));

/** Every `.ts` file under `dir`. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

describe('the workspace', () => {
  it('has no dependency cycle between its packages, counting every kind of dependency', () => {
    const names = new Set(projects.map(({ manifest }) => manifest.name));
    const edges = new Map(
      projects.map(({ manifest }) => [
        manifest.name,
        Object.keys({
          ...manifest.dependencies,
          ...manifest.devDependencies,
          ...manifest.peerDependencies,
          ...manifest.optionalDependencies,
        }).filter((dep) => names.has(dep)),
      ]),
    );
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const path: string[] = [];
    const visit = (name: string) => {
      if (state.get(name) === 'open') cycles.push([...path.slice(path.indexOf(name)), name].join(' -> '));
      if (state.has(name)) return;
      state.set(name, 'open');
      path.push(name);
      for (const dep of edges.get(name) ?? []) visit(dep);
      path.pop();
      state.set(name, 'done');
    };
    for (const name of names) visit(name);
    expect(edges.get('@kernelwarden/local-gateway')).toContain('@kernelwarden/gateway-client');
    expect(cycles).toEqual([]);
  });

  it('asks for one zod range everywhere', () => {
    const ranges = new Map<string, string>();
    for (const { manifest } of projects) {
      const range = manifest.dependencies?.zod ?? manifest.devDependencies?.zod;
      if (range) ranges.set(manifest.name, range);
    }
    expect(ranges.size).toBeGreaterThanOrEqual(5);
    expect(new Set(ranges.values()).size, JSON.stringify(Object.fromEntries(ranges))).toBe(1);
  });

  it("imports zod through its 'zod/v3' entry only", () => {
    const others: string[] = [];
    for (const { dir } of projects) {
      let files: string[];
      try {
        files = sources(join(dir, 'src'));
      } catch {
        continue;
      }
      for (const file of files) {
        // Code only: a comment may name another entry.
        const text = readFileSync(file, 'utf8').replace(/^\s*(\/\/|\/\*|\*).*$/gm, '');
        for (const match of text.matchAll(/(?:from\s+|import\(\s*|require\(\s*|lazyModule<[^>]*>\(\s*)'(zod[^']*)'/g)) {
          if (match[1] !== 'zod/v3') others.push(`${file.slice(root.length)}: '${match[1]}'`);
        }
      }
    }
    expect(others).toEqual([]);
  });
});
