import { describe, expect, it } from 'vitest';
import { redactTokens } from './gateway-command.js';

describe('redactTokens', () => {
  it('hides tokens in server URLs and authorization headers', () => {
    expect(redactTokens('[I ServerApp] http://127.0.0.1:8888/?token=abc123def and more')).toBe(
      '[I ServerApp] http://127.0.0.1:8888/?token=<redacted> and more',
    );
    expect(redactTokens('GET /api/kernels?x=1&token=s3cr3t HTTP/1.1')).toBe(
      'GET /api/kernels?x=1&token=<redacted> HTTP/1.1',
    );
    expect(redactTokens('      "Authorization": "token s3cr3t",')).toBe('      "Authorization": "token <redacted>",');
    expect(redactTokens('Authorization: Bearer s3cr3t')).toBe('Authorization: Bearer <redacted>');
    expect(redactTokens('Kernel started: 1234')).toBe('Kernel started: 1234');
  });
});
