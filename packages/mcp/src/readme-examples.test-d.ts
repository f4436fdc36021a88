// Type-checked by `tsc --build` and never run: the README's examples need a Jupyter server (and, for the AI SDK one,
// a model). readme.test.ts checks that the README shows these blocks verbatim, with the published package name.
import { GatewayKernel } from '@kernelwarden/gateway-client';
import { LocalGateway } from '@kernelwarden/local-gateway';
import { KernelSession } from '@kernelwarden/supervisor';
import { createWatchdog } from '@kernelwarden/watchdog';
import { generateText, stepCountIs } from 'ai';
import { createAgentTools, createMcpServer, McpStdioTransport } from './index.js';

export async function mcpServerExample(): Promise<void> {
  // readme-example:mcp:start
  const gateway = await LocalGateway.acquire();
  const session = new KernelSession({
    python: ({ cwd, signal }) => GatewayKernel.start({ gateway, cwd, signal }),
    executor: createWatchdog({ cellTimeoutMs: 0 }), // run_code's timeout_seconds bounds each cell
  });
  const server = createMcpServer({ session, defaultTimeoutMs: 120_000 });
  await server.connect(new McpStdioTransport()); // stdin and stdout
  process.stdin.on('end', () => void session.close().then(() => gateway.release()));
  // readme-example:mcp:end
}

export async function agentToolsExample(): Promise<void> {
  // readme-example:ai:start
  const gateway = await LocalGateway.acquire();
  const session = new KernelSession({
    python: ({ cwd, signal }) => GatewayKernel.start({ gateway, cwd, signal }),
    executor: createWatchdog({ cellTimeoutMs: 0 }),
  });
  try {
    const { text } = await generateText({
      model: 'anthropic/claude-sonnet-4.5',
      tools: createAgentTools(session, { defaultTimeoutMs: 60_000 }),
      stopWhen: stepCountIs(5),
      prompt: 'Plot a sine wave with matplotlib and tell me where it peaks.',
    });
    console.log(text);
  } finally {
    await session.close(); // its kernels are shut down, also when generateText throws
    await gateway.release();
  }
  // readme-example:ai:end
}
