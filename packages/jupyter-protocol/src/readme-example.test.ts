import { readFile } from 'node:fs/promises';
import { expect, it } from 'vitest';
// The README shows the block between the markers below, with this import from the published name.
import { createMessage, decodeFrame, encodeFrame, V1_SUBPROTOCOL, WireFormatError } from './index.js';

it('runs the README example', async () => {
  const logged: unknown[] = [];
  const console = { log: (...args: unknown[]) => logged.push(args) };
  // readme-example:start
  const request = createMessage('shell', 'execute_request', 'my-session', { code: '6 * 7', silent: false });
  const frame = encodeFrame(request, 'v1'); // send it on a socket opened with the V1_SUBPROTOCOL protocol
  const back = decodeFrame(frame, 'v1');
  console.log(V1_SUBPROTOCOL, back.header.msg_type, back.content.code); // v1.kernel.websocket.jupyter.org execute_request 6 * 7

  try {
    decodeFrame(new Uint8Array([1, 2, 3]), 'v1');
  } catch (error) {
    console.log(WireFormatError.isInstance(error) && error.code); // WIRE_FORMAT
  }
  // readme-example:end
  expect(logged).toEqual([['v1.kernel.websocket.jupyter.org', 'execute_request', '6 * 7'], ['WIRE_FORMAT']]);
  const source = await readFile(new URL('./readme-example.test.ts', import.meta.url), 'utf8');
  const block = source.split('// readme-example:start\n')[1]?.split('  // readme-example:end')[0] ?? '';
  const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
  expect(readme).toContain(block.replace(/^ {2}/gm, ''));
});
