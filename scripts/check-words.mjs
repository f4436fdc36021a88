#!/usr/bin/env node
// Fails when a word the glossary (docs/ARCHITECTURE.md, "## Glossary") retired comes back where it would mean the other thing: "lease" for the embedded
// gateway's ticket, "pool" for the supervisor's spare kernels, "session" for a process group or for Jupyter's session
// id. Scans the tracked source, script and documentation files (changelogs, changesets and the glossary section itself aside).
//
//   node scripts/check-words.mjs [--root DIR]
//
// Exit 0: nothing found. Exit 1: each hit printed as `path:line: text — rule`.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** The fields of a LocalGatewayTicket that a supervisor `Lease<K>` does not have. */
const TICKET_FIELDS =
  'stateDir|kernelSpecDir|pool|processes|ownership|diagnostics|baseUrl|token|pid|startQueue|request|WebSocket|fetch|reused';

/** Each rule: what it catches, where (a path test), and the pattern. */
export const RULES = [
  {
    name: '"lease" is the supervisor\'s Lease<K>; the embedded gateway hands out tickets (LocalGatewayTicket)',
    where: () => true,
    pattern: /\bLocalGatewayLeases?\b|`?\bLocalGateway`?(?:'s)? leases?\b/,
  },
  {
    name: '"lease" is the supervisor\'s Lease<K>; in local-gateway the word is "ticket"',
    where: (path) => path.startsWith('packages/local-gateway/'),
    pattern: /\bleases?\b|\bLeases?\b|\bLEASES?\b|[a-z]Leases?\b|\bLEASE_/,
  },
  {
    name: '"lease" is the supervisor\'s Lease<K>; this value is a LocalGatewayTicket (name it ticket)',
    where: () => true,
    pattern: new RegExp(
      `\\blease\\??\\.(?:${TICKET_FIELDS})\\b|\\bgateway: lease\\b|\\blease = await LocalGateway\\.acquire\\b`,
    ),
  },
  {
    name: '"warm pool" is the embedded gateway\'s; the supervisor keeps spare kernels (spares)',
    where: (path) => path.startsWith('packages/supervisor/'),
    pattern: /\bpool(?:s|ed|ing)?\b|\bPools?\b|warm.?pool/i,
  },
  {
    name: '"warm pool" is the embedded gateway\'s; the supervisor\'s API says spares',
    where: () => true,
    pattern:
      /\b(?:WarmPools?|WarmPoolOptions|WarmPoolStatus|configurePool|drainPool|DEFAULT_POOL_SIZE)\b|\bsup(?:ervisor)?\.poolReady\b|python_ready\.pool\b/,
  },
  {
    name: '"session" is a KernelSession; a setsid process leads its own process group',
    where: () => true,
    pattern: /\bsessions? of (?:its|their) own\b|\bin (?:its|their) own session\b|\bleft its session\b/i,
  },
  {
    name: '"session" is a KernelSession; Jupyter\'s client id is the "session id"',
    where: (path) => path.startsWith('packages/gateway-client/') || path.startsWith('packages/jupyter-protocol/'),
    pattern: /\bsame session\b(?! id)/i,
  },
];

const SCANNED = /\.(?:ts|mts|cts|mjs|cjs|js|py|md)$/;
const SKIPPED = [
  /(?:^|\/)CHANGELOG\.md$/,
  /^\.changeset\//,
  /^scripts\/check-words\.mjs$/,
  /(?:^|\/)(?:node_modules|dist|\.tsbuild)\//,
  /^tools\/test-env\/src\/repo-checks\.test\.ts$/,
];

function listFiles(root) {
  try {
    const out = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return out.split('\0').filter(Boolean);
  } catch {
    // Not a git checkout (a fixture directory): every file under root.
    const files = [];
    const walk = (dir) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) {
          if (name !== 'node_modules' && name !== '.git') walk(path);
        } else files.push(relative(root, path));
      }
    };
    walk(root);
    return files;
  }
}

/** The file whose "## Glossary" section names the retired words (that section is not scanned). */
const GLOSSARY_FILE = 'docs/ARCHITECTURE.md';

/** Indexes of the lines of the "## Glossary" section: from its heading to the next "## " heading. */
function glossaryLines(lines) {
  const inside = new Set();
  let on = false;
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].startsWith('## ')) on = lines[i].trim() === '## Glossary';
    if (on) inside.add(i);
  }
  return inside;
}

/** Every hit under `root`: `{ path, line, text, rule }`. */
export function findRetiredWords(root) {
  const hits = [];
  for (const path of listFiles(root)) {
    if (!SCANNED.test(path) || SKIPPED.some((skip) => skip.test(path))) continue;
    let text;
    try {
      text = readFileSync(join(root, path), 'utf8');
    } catch {
      continue; // listed but gone (a deleted, unstaged file)
    }
    const rules = RULES.filter((rule) => rule.where(path));
    if (rules.length === 0) continue;
    const lines = text.split('\n');
    const glossary = path === GLOSSARY_FILE ? glossaryLines(lines) : undefined;
    for (let i = 0; i < lines.length; i++) {
      if (glossary?.has(i)) continue;
      for (const rule of rules) {
        if (rule.pattern.test(lines[i])) {
          hits.push({ path, line: i + 1, text: lines[i].trim(), rule: rule.name });
        }
      }
    }
  }
  return hits;
}

function main() {
  const args = process.argv.slice(2);
  const rootAt = args.indexOf('--root');
  const root = rootAt >= 0 ? args[rootAt + 1] : join(import.meta.dirname, '..');
  const hits = findRetiredWords(root);
  for (const hit of hits) console.log(`${hit.path}:${hit.line}: ${hit.text.slice(0, 140)} — ${hit.rule}`);
  if (hits.length > 0) {
    console.error(
      `check-words: ${hits.length} retired word(s); the glossary in docs/ARCHITECTURE.md says which word to use`,
    );
    process.exit(1);
  }
  console.log('check-words: ok');
}

if (process.argv[1] && import.meta.filename === process.argv[1]) main();
