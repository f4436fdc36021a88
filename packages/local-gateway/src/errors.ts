import { KernelwardenError } from '@kernelwarden/core';

/** Codes of `LocalGatewayError`. */
export type LocalGatewayErrorCode =
  | 'LOCAL_GATEWAY_COMMAND'
  | 'LOCAL_GATEWAY_STATE_DIR'
  | 'LOCAL_GATEWAY_INSECURE'
  | 'LOCAL_GATEWAY_TOKEN_REFUSED'
  | 'LOCAL_GATEWAY_CONFIG';

/**
 * The embedded gateway cannot be provided: jupyter-server is not installed (`LOCAL_GATEWAY_COMMAND`), the state
 * directory cannot be created or belongs to someone else (`LOCAL_GATEWAY_STATE_DIR`), or a system-wide jupyter
 * config fights the token: the server answers without it (`LOCAL_GATEWAY_INSECURE`) or refuses it
 * (`LOCAL_GATEWAY_TOKEN_REFUSED`), or the server did not run its own configuration to the end (`LOCAL_GATEWAY_CONFIG`:
 * its kernels would run without ipc, their own logs and markers); the server is then stopped before this is thrown.
 * Not retryable.
 */
export class LocalGatewayError extends KernelwardenError {
  static override readonly brand: string = 'LocalGatewayError';

  constructor(message: string, options: { code: LocalGatewayErrorCode; cause?: unknown }) {
    super(message, { code: options.code, cause: options.cause });
  }
}
