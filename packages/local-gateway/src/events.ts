/** Something `LocalGateway` did, for logs and progress displays. Events never carry the token. */
export type LocalGatewayEvent =
  | { type: 'lock-wait'; ownerPid: number }
  | { type: 'lock-takeover'; previousOwnerPid: number | undefined }
  | { type: 'server-reused'; baseUrl: string; pid: number }
  | { type: 'server-starting'; port: number; logFile: string }
  | { type: 'server-ready'; baseUrl: string; pid: number }
  | { type: 'server-stopped'; pid: number; reason: 'unhealthy' | 'last-release' }
  | { type: 'server-untrusted'; reason: string }
  | { type: 'port-taken'; port: number }
  | { type: 'kernel-reaped'; kernelId: string; ownerPid: number }
  | { type: 'reap-failed'; kernelId: string; message: string };

/** Reports one event. */
export type Emit = (event: LocalGatewayEvent) => void;

/** The caller's `onEvent`, made safe to call: a listener that throws never breaks the gateway. */
export function emitter(onEvent: ((event: LocalGatewayEvent) => void) | undefined): Emit {
  return (event) => {
    try {
      onEvent?.(event);
    } catch {
      // a listener's failure must not break the gateway
    }
  };
}
