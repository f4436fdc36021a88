// Type-checked by `tsc --build` and never run: the example asks a gateway for its status. tools/test-env's
// readme-examples test checks that the README shows each marked block verbatim, with these imports from the published
// names.
import { abortScope, KernelwardenError, withDeadline } from './index.js';
import { identityOf, isProcessAlive, kernelMarker, killProcessesCarrying } from './os.js';

export async function openingExample(): Promise<void> {
  // readme-example:opening:start
  const controller = new AbortController();
  const answer = await withDeadline(
    async (signal) => (await fetch('http://127.0.0.1:8888/api/status', { signal })).status,
    { signal: controller.signal, timeoutMs: 2000, timeoutMessage: 'Gateway status took longer than 2 s' },
  ).catch((error: unknown) => (KernelwardenError.isInstance(error) ? error.code : 'other'));
  console.log(answer); // 200, 'DEADLINE_EXCEEDED' (name 'TimeoutError') or 'other'

  using scope = abortScope({ signal: controller.signal, timeoutMs: 5000 }); // one deadline for several steps
  console.log(scope.remaining() <= 5000);
  // readme-example:opening:end
}

export function processExample(pid: number, kernelId: string): void {
  // readme-example:process:start
  const server = identityOf(pid); // pid + start time: a reused pid is not taken for it
  if (!isProcessAlive(server)) {
    const killed = killProcessesCarrying(kernelMarker({ kernelId })); // KERNELWARDEN_KERNEL=<instance>:<kernelId>
    console.log(`${killed.length} leftover processes of kernel ${kernelId} killed`);
  }
  // readme-example:process:end
}
