// The clients the bench compares, by key. Each `start(server)` resolves to an object with
// `run(code, { onText }) -> { status }`, `interrupt()`, `close()` and `kernelId`.
import { JupyterLabClient } from './jupyterlab.mjs';
import { KernelwardenClient } from './kernelwarden.mjs';
import { MinimalClient } from './minimal.mjs';

export const CLIENTS = {
  kernelwarden: {
    label: 'kernelwarden GatewayKernel',
    start: (server) => KernelwardenClient.start(server),
  },
  'kernelwarden-nopong': {
    label: 'kernelwarden, stallWorkaround: false',
    start: (server) => KernelwardenClient.start({ ...server, options: { stallWorkaround: false } }),
  },
  jupyterlab: {
    label: '@jupyterlab/services 7.6.6',
    start: (server) => JupyterLabClient.start(server),
  },
  minimal: {
    label: 'minimal ws v1 client',
    start: (server) => MinimalClient.start(server),
  },
  'minimal-pong': {
    label: 'minimal ws v1 + unsolicited pong',
    start: (server) => MinimalClient.start({ ...server, pong: true }),
  },
};

export const ZMQ_FLOOR_LABEL = 'jupyter_client over ZMQ (floor)';
