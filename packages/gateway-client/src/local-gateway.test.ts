import { readdirSync, readFileSync } from 'node:fs';
import { KernelwardenError } from '@kernelwarden/core';
import { describe, expect, it } from 'vitest';
import { LOCAL_GATEWAY_PACKAGE, LocalGatewayError, loadLocalGateway } from './local-gateway.js';

const packageDir = new URL('../', import.meta.url);

describe('the deprecated LocalGateway forwarder', () => {
  it('rejects with LOCAL_GATEWAY_NOT_INSTALLED, saying what to install, when the package is missing', async () => {
    const error = await loadLocalGateway('@kernelwarden/no-such-package').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(LocalGatewayError.isInstance(error)).toBe(true);
    expect((error as LocalGatewayError).code).toBe('LOCAL_GATEWAY_NOT_INSTALLED');
    expect((error as Error).message).toMatch(/install it \(npm install @kernelwarden\/no-such-package\)/);
  });

  it("recognises @kernelwarden/local-gateway's errors with instanceof, and no other error", () => {
    class MovedLocalGatewayError extends KernelwardenError {
      static override readonly brand: string = 'LocalGatewayError';
    }
    class OtherError extends KernelwardenError {
      static override readonly brand: string = 'OtherError';
    }
    expect(new MovedLocalGatewayError('x', { code: 'LOCAL_GATEWAY_COMMAND' })).toBeInstanceOf(LocalGatewayError);
    expect(new LocalGatewayError('x', { code: 'LOCAL_GATEWAY_COMMAND' })).toBeInstanceOf(LocalGatewayError);
    expect(new OtherError('x', { code: 'OTHER' }) instanceof LocalGatewayError).toBe(false);
    expect(new Error('x') instanceof LocalGatewayError).toBe(false);
  });

  it('is not a dependency: only an optional peer, and the built package never imports it statically', () => {
    const manifest = JSON.parse(readFileSync(new URL('package.json', packageDir), 'utf8')) as Record<
      string,
      Record<string, unknown> | undefined
    >;
    expect(manifest.dependencies?.[LOCAL_GATEWAY_PACKAGE]).toBeUndefined();
    expect(manifest.peerDependenciesMeta?.[LOCAL_GATEWAY_PACKAGE]).toEqual({ optional: true });
    const dist = new URL('dist/', packageDir);
    const files = readdirSync(dist).filter((name) => /\.(js|d\.ts)$/.test(name));
    expect(files).toContain('index.js');
    for (const name of files) {
      const text = readFileSync(new URL(name, dist), 'utf8');
      expect(text, name).not.toMatch(/(from|import|require\()\s*["']@kernelwarden\/local-gateway["']/);
    }
  });
});
