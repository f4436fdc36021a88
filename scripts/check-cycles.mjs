#!/usr/bin/env node
// Fails on any import cycle among the source files of one package (packages/<name>/src), type-only imports and
// re-exports included: `import`, `import type`, `export … from`, `import()` and `require()` of a relative path.
// Imports between packages go through their published entry points and are not followed.
//
//   node scripts/check-cycles.mjs [--root DIR] [--report-only]
//
// Prints each cycle as `package: a.ts → b.ts → a.ts`. Exit 1 when there is one, unless --report-only (print, exit 0).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const SOURCE = /\.(?:ts|tsx|mts|cts)$/;

function sourceFiles(dir) {
  const files = [];
  const walk = (at) => {
    for (const name of readdirSync(at)) {
      const path = join(at, name);
      if (statSync(path).isDirectory()) {
        if (name !== 'node_modules' && name !== 'dist') walk(path);
      } else if (SOURCE.test(name) && !name.endsWith('.d.ts')) files.push(path);
    }
  };
  if (existsSync(dir)) walk(dir);
  return files;
}

/** The file a relative specifier names (`./a.js` is `./a.ts` in the sources), or undefined outside `files`. */
function resolveSpecifier(from, specifier, files) {
  const base = resolve(dirname(from), specifier);
  const stem = base.replace(/\.(?:[cm]?js|jsx)$/, '');
  const candidates = [base, `${stem}.ts`, `${stem}.tsx`, `${stem}.mts`, `${stem}.cts`, join(base, 'index.ts')];
  return candidates.find((candidate) => files.has(candidate));
}

/** The import graph of one package's sources: file → files it imports. */
export function importGraph(srcDir) {
  const files = new Set(sourceFiles(srcDir));
  const graph = new Map();
  for (const file of files) {
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const edges = new Set();
    for (const { fileName } of info.importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const target = resolveSpecifier(file, fileName, files);
      if (target) edges.add(target);
    }
    graph.set(file, [...edges].sort());
  }
  return graph;
}

/** Strongly connected components with a cycle (more than one file, or a file importing itself), by Tarjan. */
function cyclicComponents(graph) {
  let index = 0;
  const indices = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const components = [];
  const visit = (node) => {
    indices.set(node, index);
    low.set(node, index);
    index += 1;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!indices.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node), low.get(next)));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node), indices.get(next)));
      }
    }
    if (low.get(node) === indices.get(node)) {
      const component = [];
      let member;
      do {
        member = stack.pop();
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) components.push(component.sort());
    }
  };
  for (const node of [...graph.keys()].sort()) if (!indices.has(node)) visit(node);
  return components;
}

/** One concrete cycle through the component's first file (breadth-first: the shortest way back). */
function cycleThrough(component, graph) {
  const members = new Set(component);
  const start = component[0];
  const previous = new Map();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift();
    for (const next of graph.get(node) ?? []) {
      if (!members.has(next)) continue;
      if (next === start) {
        const path = [node];
        while (path[0] !== start) path.unshift(previous.get(path[0]));
        return [...path, start];
      }
      if (!previous.has(next)) {
        previous.set(next, node);
        queue.push(next);
      }
    }
  }
  return [start, start];
}

/** Every cycle of every package under `root`: `{ pkg, files, cycle }` (paths relative to the package's src). */
export function findCycles(root) {
  const packagesDir = join(root, 'packages');
  const found = [];
  for (const pkg of existsSync(packagesDir) ? readdirSync(packagesDir).sort() : []) {
    const srcDir = join(packagesDir, pkg, 'src');
    if (!existsSync(srcDir)) continue;
    const graph = importGraph(srcDir);
    for (const component of cyclicComponents(graph)) {
      const rel = (file) => relative(srcDir, file);
      found.push({ pkg, files: component.map(rel), cycle: cycleThrough(component, graph).map(rel) });
    }
  }
  return found;
}

function main() {
  const args = process.argv.slice(2);
  const rootAt = args.indexOf('--root');
  const root = rootAt >= 0 ? resolve(args[rootAt + 1]) : join(import.meta.dirname, '..');
  const reportOnly = args.includes('--report-only');
  const cycles = findCycles(root);
  for (const { pkg, files, cycle } of cycles) {
    const more = files.length > cycle.length - 1 ? ` (${files.length} files in the cycle: ${files.join(', ')})` : '';
    console.log(`${pkg}: ${cycle.join(' → ')}${more}`);
  }
  if (cycles.length === 0) {
    console.log('check-cycles: no import cycle within a package');
    return;
  }
  const message = `check-cycles: ${cycles.length} import cycle(s) within a package`;
  if (reportOnly) {
    console.log(`${message} (reported only: --report-only)`);
    return;
  }
  console.error(`${message}: move the shared types to the module that owns them`);
  process.exit(1);
}

if (process.argv[1] && import.meta.filename === process.argv[1]) main();
