import { existsSync, lstatSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliDirs, type Ran, runCli } from './cli-binary.test-fixture.js';

// A contained kernel (--no-network) whose workspace holds --outputs-dir: the CLI writes the images outside the
// sandbox, as the user, so the kernel must not be able to steer those writes out of the outputs directory.

let stateDir: string;
let workDir: string;
let outsideCount = 0;

const cli = (args: string[]): Promise<Ran> => runCli(args, { stateDir, cwd: workDir, timeoutMs: 120_000 });

beforeAll(() => {
  ({ stateDir, workDir } = cliDirs('cli-outputs-dir'));
});

/** A new directory of the host the contained kernel cannot write (it is not its workspace). */
function outsideDir(): string {
  const dir = `${workDir}-outside-${++outsideCount}`;
  mkdirSync(dir);
  return dir;
}

afterAll(async () => {
  const stopped = await runCli(['gateway', 'stop'], { stateDir, cwd: workDir });
  expect(stopped.code, stopped.stderr).toBe(0);
});

/** Python that shows an SVG (whose text the kernel chooses) and waits until the CLI saved the n-th image of `dir`. */
const SHOW = `
import glob, os, time
from IPython.display import SVG, display
def show(text, dir, n):
    display(SVG('<svg xmlns="http://www.w3.org/2000/svg">' + text + '</svg>'))
    for _ in range(600):
        got = glob.glob(os.path.join(dir, "kw-*-%d.svg" % n))
        if got:
            return got[0]
        time.sleep(0.05)
`;

describe('kernelwarden run --outputs-dir under a contained kernel', () => {
  it('writes no image through a link the kernel planted under the next image name, or through a directory it swapped for a link', async () => {
    const outside = outsideDir();
    const target = join(outside, 'planted-target.txt');
    const code = `${SHOW}
try:
    open(${JSON.stringify(join(outside, 'direct'))}, "w")
    print("wrote outside directly")
except OSError:
    print("cannot write outside")
first = show("one", "plots", 1)
os.symlink(${JSON.stringify(target)}, first.replace("-1.svg", "-2.svg"))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg">two</svg>'))
os.rename("plots", "plots-moved")
os.symlink(${JSON.stringify(outside)}, "plots")
display(SVG('<svg xmlns="http://www.w3.org/2000/svg">three</svg>'))
`;
    const ran = await cli(['run', '--no-network', '--outputs-dir', 'plots', '-c', code]);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe('cannot write outside\n');
    // The planted name is refused; the third image lands in the directory opened at first, wherever it was moved.
    expect(existsSync(target)).toBe(false);
    expect(readdirSync(outside)).toEqual([]);
    const moved = readdirSync(join(workDir, 'plots-moved')).sort();
    expect(moved).toHaveLength(3);
    expect(moved.filter((name) => lstatSync(join(workDir, 'plots-moved', name)).isSymbolicLink())).toHaveLength(1);
    expect(ran.stderr).toContain(
      `kernelwarden: 1 image output not saved: a file of its name was already in ${join(workDir, 'plots')}, or a link was put in its way while the cell ran\n`,
    );
  });

  it('saves nothing when the kernel put a link in place of the outputs directory before its first image', async () => {
    const outside = outsideDir();
    const code = `${SHOW}
os.symlink(${JSON.stringify(outside)}, "swapped")
display(SVG('<svg xmlns="http://www.w3.org/2000/svg">one</svg>'))
`;
    const ran = await cli(['run', '--no-network', '--json', '--outputs-dir', 'swapped', '-c', code]);
    expect(ran.code, ran.stderr).toBe(0);
    expect(readdirSync(outside)).toEqual([]);
    const doc = JSON.parse(ran.stdout);
    expect(doc).toMatchObject({ exitCode: 0, status: 'ok', files: [], imagesNotSaved: 1 });
    expect(doc.notes).toEqual([
      `1 image output not saved: a file of its name was already in ${join(workDir, 'swapped')}, or a link was put in its way while the cell ran`,
    ]);
  });
});
