export type { Unsubscribe } from '@kernelwarden/core';
