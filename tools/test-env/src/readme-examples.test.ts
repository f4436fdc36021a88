import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// Every TypeScript example in a package README is type-checked: it is a marked block
// (`// readme-example[:name]:start` … `// readme-example[:name]:end`) of a `src/readme-example*.test*.ts` file of that
// package, which `tsc --build` checks (and vitest runs, for a `.test.ts`), and the README shows it verbatim, after
// the import lines, each name of which that file imports from the same module (the package's own name as
// `./index.js`, a subpath `@kernelwarden/<pkg>/<sub>` as `./<sub>.js`). A ```ts block that does not parse as
// TypeScript is a list of signatures, not an example.

const packagesDir = new URL('../../../packages/', import.meta.url);

interface Block {
  line: number;
  imports: Map<string, string>;
  body: string;
}

/** The `import` statements at the top of `text`: each imported name → its module specifier. */
function importsOf(text: string): { names: Map<string, string>; end: number } {
  const names = new Map<string, string>();
  const pattern = /^import\s+(type\s+)?(?:\{([^}]*)\}|\*\s+as\s+(\w+)|(\w+))\s+from\s+'([^']+)';\n/gm;
  let end = 0;
  for (const match of text.matchAll(pattern)) {
    const module = match[5] as string;
    const list = match[2]?.split(',') ?? [match[3] ?? match[4] ?? ''];
    for (const item of list) {
      const name = item.trim().replace(/^type\s+/, '');
      if (name) names.set(name, module);
    }
    end = Math.max(end, (match.index ?? 0) + match[0].length);
  }
  return { names, end };
}

/** Each ```ts block of a README: its line, its import lines' names, and the rest. */
function readmeBlocks(readme: string): Block[] {
  const blocks: Block[] = [];
  const lines = readme.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const fence = /^( *)```ts\s*$/.exec(lines[i] as string);
    if (!fence) continue;
    const indent = fence[1] as string;
    const start = i + 1;
    while (!/^ *```\s*$/.test(lines[++i] as string));
    const text = lines
      .slice(start, i)
      .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
      .join('\n');
    const { names, end } = importsOf(`${text}\n`);
    blocks.push({ line: start, imports: names, body: text.slice(end).replace(/^\n+/, '').trimEnd() });
  }
  return blocks;
}

/** Whether `code` parses as TypeScript (an example), rather than being a list of signatures. */
function parses(code: string): boolean {
  const file = ts.createSourceFile('block.ts', code, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  return (file as unknown as { parseDiagnostics: unknown[] }).parseDiagnostics.length === 0;
}

/** The marked blocks of a file, dedented. */
function markedBlocks(source: string): string[] {
  const pattern = /^( *)\/\/ readme-example(:[\w-]+)?:start\n([\s\S]*?)\n *\/\/ readme-example\2:end$/gm;
  return [...source.matchAll(pattern)].map((match) => {
    const indent = match[1] as string;
    return (match[3] as string)
      .split('\n')
      .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
      .join('\n')
      .trimEnd();
  });
}

const packages = readdirSync(packagesDir, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name)
  .filter((name) => {
    try {
      return readFileSync(new URL(`${name}/README.md`, packagesDir), 'utf8').includes('```ts');
    } catch {
      return false;
    }
  });

describe('README examples', () => {
  it('finds the packages whose READMEs show TypeScript', () => {
    expect(packages).toContain('supervisor');
    expect(packages.length).toBeGreaterThanOrEqual(10);
  });

  for (const name of packages) {
    it(`${name}: every example is a type-checked block, shown verbatim with its imports`, () => {
      const dir = new URL(`${name}/`, packagesDir);
      const { name: packageName } = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name: string };
      const sources = readdirSync(new URL('src/', dir))
        .filter((file) => /^readme-examples?\.test(-d)?\.ts$/.test(file))
        .map((file) => ({ file, text: readFileSync(join(dir.pathname, 'src', file), 'utf8') }));
      const candidates = sources.map(({ file, text }) => ({
        file,
        blocks: markedBlocks(text),
        imports: importsOf(text.replace(/^\/\/.*\n/gm, '')).names,
      }));
      const local = (specifier: string) =>
        specifier === packageName
          ? './index.js'
          : specifier.startsWith(`${packageName}/`)
            ? `./${specifier.slice(packageName.length + 1)}.js`
            : specifier;
      const uncovered: string[] = [];
      for (const block of readmeBlocks(readFileSync(new URL('README.md', dir), 'utf8'))) {
        const code = [...block.imports].map(([n, m]) => `import { ${n} } from '${m}';`).join('\n');
        if (!parses(`${code}\n${block.body}`)) continue;
        const home = candidates.find((candidate) => candidate.blocks.includes(block.body));
        if (!home) {
          uncovered.push(`README.md:${block.line}: no marked block of src/readme-example*.test*.ts is this example`);
          continue;
        }
        for (const [imported, specifier] of block.imports) {
          const there = home.imports.get(imported);
          if (there !== local(specifier)) {
            uncovered.push(
              `README.md:${block.line}: imports ${imported} from '${specifier}', ${home.file} from ${there ? `'${there}'` : 'nowhere'}`,
            );
          }
        }
      }
      expect(uncovered).toEqual([]);
    });
  }
});
