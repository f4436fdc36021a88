import type { LocalGatewayStatus } from '@kernelwarden/local-gateway';
import { describe, expect, it } from 'vitest';
import { kernelStatusLine, runningStatusText } from './gateway-status-text.js';

describe('gateway status text', () => {
  it('lists each kernel with its state and owner, and every further field the gateway reports for it', () => {
    // A kernel's interpreter and ipykernel have their own place; other fields are shown as they come.
    const kernels = [
      {
        id: 'k1',
        name: 'python3',
        executionState: 'busy',
        ownerPid: 42,
        ownerAlive: true,
        interpreter: '/usr/bin/python3',
        ipykernel: '6.17.0',
      },
      { id: 'k2', name: 'ir', executionState: 'idle', ownerPid: 7, ownerAlive: false },
      { id: 'k3', name: 'python3', executionState: 'idle', pooled: true, ipykernel: undefined },
    ] as LocalGatewayStatus['kernels'];
    const status: LocalGatewayStatus = {
      running: true,
      stateDir: '/state',
      command: '/usr/bin/jupyter-server',
      interpreter: '/usr/bin/python3',
      baseUrl: 'http://127.0.0.1:8888',
      pid: 100,
      startedAt: '2026-01-01T00:00:00.000Z',
      holders: [{ pid: 42, acquiredAt: '2026-01-01T00:00:01.000Z' }],
      kernels,
      pool: {},
    };
    expect(runningStatusText(status).split('\n')).toEqual([
      'running: http://127.0.0.1:8888 (pid 100, since 2026-01-01T00:00:00.000Z)',
      'server: /usr/bin/jupyter-server (/usr/bin/python3)',
      'state: /state',
      'holders: pid 42',
      'kernels: ',
      '  k1 python3 busy (pid 42) — python /usr/bin/python3, ipykernel 6.17.0',
      '  k2 ir idle (pid 7, gone)',
      '  k3 python3 idle; pooled',
    ]);
    expect(runningStatusText({ ...status, holders: [], kernels: [] })).toContain('holders: none\nkernels: none');
  });

  it('shows a structured field as JSON', () => {
    const kernel = { id: 'k', name: 'python3', python: { version: '3.11', path: '/p' } };
    expect(kernelStatusLine(kernel)).toBe('  k python3; python {"version":"3.11","path":"/p"}');
  });
});
