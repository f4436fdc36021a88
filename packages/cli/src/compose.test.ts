import { IsolationUnavailableError } from '@kernelwarden/isolation';
import { FakeGateway, type FakeKernel, type KernelScript, pythonLikeScript } from '@kernelwarden/testkit';
import { describe, expect, it } from 'vitest';
import { parseCommand, type StackOptions } from './args.js';
import { createStack, kernelEnvironment, stackLimits } from './compose.js';

function stackOf(argv: string[]): StackOptions {
  const command = parseCommand(['repl', ...argv], { cwd: process.cwd() });
  if (command.command !== 'repl') throw new Error('unreachable');
  return command.stack;
}

async function refusal(options: StackOptions): Promise<IsolationUnavailableError> {
  const error = await createStack(options, { env: {} }).then(
    async (stack) => {
      await stack.close();
      throw new Error('expected createStack to refuse');
    },
    (e: unknown) => e,
  );
  expect(IsolationUnavailableError.isInstance(error), String(error)).toBe(true);
  return error as IsolationUnavailableError;
}

describe('stackLimits', () => {
  it('gives the limits the flags ask for and nothing else', () => {
    expect(stackLimits(stackOf([]))).toEqual({});
    expect(stackLimits(stackOf(['--memory', '512M']))).toEqual({ memoryBytes: 512 * 1024 * 1024 });
    expect(
      stackLimits(stackOf(['--max-processes', '64', '--cpu-time', '2m', '--no-network', '--hide', '/srv'])),
    ).toEqual({ maxProcesses: 64, cpuSeconds: 120, network: false });
  });
});

describe('createStack with limits on a remote gateway', () => {
  // Nothing listens there: a refusal that came after connecting would be a GatewayUnavailableError instead.
  const remote = ['--gateway', 'http://127.0.0.1:9'];

  it('refuses before connecting, naming the limit flags and that they need the embedded gateway', async () => {
    const one = await refusal(stackOf([...remote, '--memory', '1G']));
    expect(one.message).toBe(
      '--memory needs the embedded gateway: a remote gateway (http://127.0.0.1:9) launches kernels whose limits ' +
        'nothing here can enforce, so none is started',
    );
    expect([one.reason, one.limit]).toEqual(['remote-gateway', 'memoryBytes']);
    const all = await refusal(
      stackOf([...remote, '--no-network', '--cpu-time', '1m', '--max-processes', '64', '--memory', '1G']),
    );
    expect(all.message).toMatch(/^--memory, --max-processes, --cpu-time, --no-network need the embedded gateway/);
  });

  it('refuses --hide with limits on a remote gateway for --hide, as without limits', async () => {
    const error = await refusal(stackOf([...remote, '--memory', '1G', '--hide', '/srv']));
    expect(error.message).toMatch(/^--hide needs the embedded gateway/);
  });
});

describe('kernelEnvironment', () => {
  const own = {
    PATH: '/usr/bin',
    OPENAI_API_KEY: 'mine',
    KERNELWARDEN_GATEWAY_TOKEN: 'gateway',
    MY_TOKEN: 'remote-gateway',
    JUPYTER_TOKEN: 'jupyter',
    KERNELWARDEN_KERNEL: 'outer:kernel',
    'BASH_FUNC_x%%': '() { :; }',
    GONE: undefined,
  };

  it("gives an embedded-gateway kernel this process's own variables, no credential, then --env", () => {
    expect(
      kernelEnvironment(
        { env: { MPLBACKEND: 'Agg', PATH: '/opt/bin' }, tokenEnv: 'MY_TOKEN' },
        { embedded: true, isolated: false },
        own,
      ),
    ).toEqual({
      PATH: '/opt/bin',
      OPENAI_API_KEY: 'mine',
      MPLBACKEND: 'Agg',
    });
  });

  it('sends a remote gateway only --env, nothing of this machine', () => {
    expect(
      kernelEnvironment(
        { env: { MPLBACKEND: 'Agg' }, tokenEnv: 'MY_TOKEN' },
        { embedded: false, isolated: false },
        own,
      ),
    ).toEqual({ MPLBACKEND: 'Agg' });
  });

  it('gives an isolated kernel only --env: credentials in the environment would undo what the policy hides', () => {
    expect(
      kernelEnvironment({ env: { MPLBACKEND: 'Agg' }, tokenEnv: 'MY_TOKEN' }, { embedded: true, isolated: true }, own),
    ).toEqual({ MPLBACKEND: 'Agg' });
  });

  it('keeps only the absolute entries of PATH, from this process or --env: relative ones name the workspace', () => {
    const relative = { ...own, PATH: ':bin:/usr/local/bin:.:/usr/bin::../x' };
    expect(
      kernelEnvironment({ env: {}, tokenEnv: 'MY_TOKEN' }, { embedded: true, isolated: false }, relative).PATH,
    ).toBe('/usr/local/bin:/usr/bin');
    for (const where of [
      { embedded: true, isolated: false },
      { embedded: true, isolated: true },
      { embedded: false, isolated: false },
    ]) {
      expect(kernelEnvironment({ env: { PATH: 'bin:/opt/bin:' }, tokenEnv: 'MY_TOKEN' }, where, relative).PATH).toBe(
        '/opt/bin',
      );
    }
  });
});

describe('the bootstrap of a stack', () => {
  it('is sent ahead of the first cell, which does not wait for its reply, and runs before it', async () => {
    const ran: string[] = [];
    let cellSentDuringBootstrap = false;
    const script: KernelScript = async (ctx) => {
      ran.push(ctx.code);
      if (ctx.code !== 'BOOT = 1') return pythonLikeScript(ctx);
      // The bootstrap holds the kernel until the cell's request arrives (at most 5 s): it only can when the client
      // sent the cell without waiting for the bootstrap's reply.
      const kernel = ctx.kernel;
      const receive = kernel.receive.bind(kernel);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 5000);
        kernel.receive = (...[msg, fromSession]: Parameters<FakeKernel['receive']>) => {
          receive(msg, fromSession);
          if (msg.header?.msg_type === 'execute_request' && msg.content?.code === 'print(1)') {
            cellSentDuringBootstrap = true;
            clearTimeout(timer);
            resolve();
          }
        };
      });
      kernel.receive = receive;
    };
    await using gateway = await FakeGateway.start({ kernelSpecs: { python3: { script } } });
    const stack = await createStack(stackOf(['--gateway', gateway.baseUrl]), {
      env: { KERNELWARDEN_GATEWAY_TOKEN: gateway.token },
      bootstrap: { python: 'BOOT = 1' },
    });
    try {
      const result = await stack.execute('print(1)', { language: 'python' });
      expect(result.status).toBe('ok');
      expect(result.stdout).toBe('1\n');
    } finally {
      await stack.close();
    }
    expect(cellSentDuringBootstrap).toBe(true);
    expect(ran.filter((code) => code === 'BOOT = 1' || code === 'print(1)')).toEqual(['BOOT = 1', 'print(1)']);
  });
});
