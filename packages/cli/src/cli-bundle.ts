/**
 * The entry of `dist/kernelwarden.cjs`: the whole command line in one CommonJS file, with every package it uses
 * inlined, which `bin.cjs` runs with V8's compile cache (see `compile-cache.ts`).
 */
export { main } from './main.js';
