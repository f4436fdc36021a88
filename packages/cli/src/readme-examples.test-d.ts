// Type-checked by `tsc --build` and never run: the example starts kernels. tools/test-env's readme-examples test
// checks that the README shows each marked block verbatim, with these imports from the published names.
import { createStack, parseCommand } from './index.js';

export async function openingExample(): Promise<void> {
  // readme-example:opening:start
  const command = parseCommand(['run', '-c', '', '--timeout', '30s']);
  if (command.command !== 'run') throw new Error('unreachable');
  const stack = await createStack(command.stack);
  try {
    const result = await stack.execute('print(1+1)', { language: 'python', onOutput: (o) => console.log(o) });
    console.log(result.status, result.stdout); // ok 2
  } finally {
    await stack.close(); // shuts the kernels down and releases the embedded gateway
  }
  // readme-example:opening:end
}
