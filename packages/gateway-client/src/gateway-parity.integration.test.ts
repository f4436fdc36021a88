import type { ExecuteResult } from '@kernelwarden/core';
import { testGateway } from '@kernelwarden/test-env';
import { FakeGateway } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { GatewayClient } from './gateway-client.js';
import { GatewayKernel } from './gateway-kernel.js';

/** What a scenario's results look like once the details that legitimately differ (tracebacks, counts) are removed. */
function summary(r: ExecuteResult) {
  const value = r.outputs.find((o) => o.type === 'execute_result');
  return {
    status: r.status,
    stdout: r.stdout,
    ename: r.error?.ename,
    value: value && 'data' in value ? value.data['text/plain'] : undefined,
    stdinRequested: r.stdinRequested,
  };
}

async function scenario(gateway: { baseUrl: string; token?: string }) {
  const client = new GatewayClient(gateway);
  const specs = await client.kernelSpecs();
  const kernel = await GatewayKernel.start({ gateway: client });
  try {
    const results = [
      await kernel.execute("print('hi')"),
      await kernel.execute('x = 2'),
      await kernel.execute('x * 21'),
      await kernel.execute('1/0'),
      await kernel.execute('undefined_name'),
      await kernel.execute("answer = input('name? ')\nprint(answer)", { onInput: () => 'ada' }),
    ];
    // Interrupt once the cell is inside its sleep: ipykernel publishes 'busy' before it runs the cell, and a SIGINT
    // landing in that gap is lost.
    let inside!: () => void;
    const running = new Promise<void>((r) => (inside = r));
    const sleeping = kernel.execute("import time\nprint('sleeping')\ntime.sleep(60)", {
      onOutput: (o) => o.type === 'stream' && o.text.includes('sleeping') && inside(),
    });
    await running;
    const interrupt = await kernel.interrupt();
    results.push(await sleeping);
    const listed = (await client.listKernels()).some((k) => k.id === kernel.id);
    return {
      python3: specs.kernelspecs.python3?.spec.language,
      protocol: kernel.protocol,
      results: results.map(summary),
      interrupt,
      listed,
      shutdown: await kernel.shutdown(),
      again: await kernel.shutdown(),
      gone: await client.getKernel(kernel.id),
    };
  } finally {
    await kernel.shutdown();
  }
}

describe('FakeGateway answers like the real jupyter-server', () => {
  it('gives the same results for the same scenario on FakeGateway and on jupyter-server', async () => {
    const { baseUrl, token } = testGateway();
    const real = await scenario({ baseUrl, token });
    await using fake = await FakeGateway.start();
    const simulated = await scenario({ baseUrl: fake.baseUrl, token: fake.token });
    expect(real.results[0]).toMatchObject({ status: 'ok', stdout: 'hi\n' });
    expect(real.results[2]?.value).toBe('42');
    expect(real.results[3]?.ename).toBe('ZeroDivisionError');
    expect(real.results[6]?.ename).toBe('KeyboardInterrupt');
    expect(simulated).toEqual(real);
  });
});
