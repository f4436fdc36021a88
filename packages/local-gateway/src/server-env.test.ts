import { describe, expect, it } from 'vitest';
import { serverEnvironment } from './server-env.js';

describe('serverEnvironment', () => {
  it("passes the user's identity, locale and path but no secret and no token of the starting process", () => {
    const env = serverEnvironment(
      {
        PATH: '/usr/bin',
        HOME: '/home/u',
        LANG: 'C.UTF-8',
        LC_ALL: 'C.UTF-8',
        AWS_SECRET_ACCESS_KEY: 'secret',
        KERNELWARDEN_GATEWAY_TOKEN: 'token',
        JUPYTER_TOKEN: 'token',
        OPENAI_API_KEY: 'key',
        UNDEFINED: undefined,
      },
      { JUPYTER_CONFIG_DIR: '/state/config' },
    );
    expect(env).toEqual({
      PATH: '/usr/bin',
      HOME: '/home/u',
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      JUPYTER_CONFIG_DIR: '/state/config',
    });
  });

  it('lets the explicit set win over an inherited variable', () => {
    expect(serverEnvironment({ PATH: '/a' }, { PATH: '/b' })).toEqual({ PATH: '/b' });
  });

  it('keeps only the absolute entries of PATH: an empty or relative one names whatever directory a launch runs in', () => {
    expect(serverEnvironment({ PATH: ':/usr/local/bin::.:bin:/usr/bin:' }, {})).toEqual({
      PATH: '/usr/local/bin:/usr/bin',
    });
    expect(serverEnvironment({}, { PATH: './tools:/opt/bin' })).toEqual({ PATH: '/opt/bin' });
  });
});
