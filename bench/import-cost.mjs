// One measurement of the import section (run in a fresh `node` by bench/run.mjs): how long `await import(target)`
// takes in this process, in ms, printed as one number. `target` is a file URL (a package's built entry) or a
// package name resolved from bench/.
const target = process.argv[2];
const start = performance.now();
await import(target);
process.stdout.write(`${(performance.now() - start).toFixed(3)}\n`);
