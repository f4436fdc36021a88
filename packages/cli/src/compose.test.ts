import { describe, expect, it } from 'vitest';
import { kernelEnvironment } from './compose.js';

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
});
