import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as deprecated from '@kernelwarden/gateway-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LOCAL_GATEWAY_SERVER_CONFIG, LocalGatewayError } from './index.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kw-compat-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe("gateway-client's deprecated LocalGateway", () => {
  it('exports the same server config as this package', () => {
    expect(deprecated.LOCAL_GATEWAY_SERVER_CONFIG).toBe(LOCAL_GATEWAY_SERVER_CONFIG);
  });

  it("forwards to this package: its errors come back, recognised by gateway-client's LocalGatewayError too", async () => {
    const error = await deprecated.LocalGateway.acquire({ stateDir: dir, command: join(dir, 'no-such-server') }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(LocalGatewayError.isInstance(error)).toBe(true);
    expect(error).toBeInstanceOf(deprecated.LocalGatewayError);
    expect((error as LocalGatewayError).code).toBe('LOCAL_GATEWAY_COMMAND');
    await expect(deprecated.LocalGateway.status({ stateDir: dir })).resolves.toMatchObject({ running: false });
    await expect(deprecated.LocalGateway.stop({ stateDir: dir })).resolves.toEqual({ stopped: false });
  });
});
