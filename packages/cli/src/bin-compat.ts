#!/usr/bin/env node
// `dist/bin.js`, for command lines written before `kernelwarden` moved to `dist/bin.cjs` (a CommonJS file starts
// without Node's ES module loader, which a command that runs once pays for at every start): it runs that file.
import { createRequire } from 'node:module';

createRequire(import.meta.url)('./bin.cjs');
