import { describe, expect, it } from 'vitest';
import { type Command, parseCommand } from './args.js';
import { helpText } from './help.js';
import { mcpCommand } from './mcp-command.js';
import { UsageError } from './usage-error.js';

type Mcp = Extract<Command, { command: 'mcp' }>;

function mcp(argv: string[], env: Record<string, string> = {}): Mcp {
  const command = parseCommand(['mcp', ...argv], { env, cwd: '/work' });
  if (command.command !== 'mcp') throw new Error(`expected mcp, got ${command.command}`);
  return command;
}

function usage(argv: string[]): UsageError {
  try {
    parseCommand(['mcp', ...argv], { cwd: '/work' });
  } catch (error) {
    expect(UsageError.isInstance(error)).toBe(true);
    return error as UsageError;
  }
  throw new Error(`expected a usage error for mcp ${argv.join(' ')}`);
}

describe('parseCommand: mcp', () => {
  it('reads the kernel flags, with the embedded gateway and no caps by default', () => {
    const command = mcp([]);
    expect(command.output).toEqual({});
    expect(command.stack).toMatchObject({ gatewayUrl: undefined, timeoutMs: undefined, cwd: '/work', hide: [] });
  });

  it('reads cwd, env, isolation, timeout, graces, gateway, token variable and the result caps', () => {
    const command = mcp(
      [
        '--cwd',
        '/data',
        '-e',
        'A=1',
        '--hide',
        '/home/me',
        '--allow',
        '/home/me/project',
        '--timeout',
        '2m',
        '--interrupt-grace',
        '1s',
        '--kill-grace',
        '5s',
        '--gateway',
        'http://127.0.0.1:8888/',
        '--token-env',
        'MY_TOKEN',
        '--max-output-chars',
        '5000',
        '--max-images',
        '2',
        '--max-image-bytes',
        '100000',
      ],
      {},
    );
    expect(command.stack).toMatchObject({
      cwd: '/data',
      env: { A: '1' },
      hide: ['/home/me'],
      allow: ['/home/me/project'],
      timeoutMs: 120_000,
      interruptGraceMs: 1_000,
      killGraceMs: 5_000,
      gatewayUrl: 'http://127.0.0.1:8888',
      tokenEnv: 'MY_TOKEN',
    });
    expect(command.output).toEqual({ maxTextChars: 5000, maxImages: 2, maxImageBytes: 100_000 });
  });

  it('takes the graces from the environment', () => {
    expect(mcp([], { KERNELWARDEN_KILL_GRACE: '3s' }).stack.killGraceMs).toBe(3_000);
  });

  it('refuses flags the client decides, arguments and bad caps, naming the flag', () => {
    expect(usage(['--lang', 'r']).message).toBe('unknown option --lang');
    expect(usage(['--json']).message).toBe('unknown option --json');
    expect(usage(['server.py']).message).toBe('mcp takes no argument: "server.py"');
    expect(usage(['--max-output-chars', '10']).message).toMatch(
      /^--max-output-chars "10" must be a whole number of at least 200/,
    );
    expect(usage(['--max-images', 'many']).message).toMatch(/^--max-images "many"/);
    expect(usage(['--timeout', '5x']).message).toMatch(/--timeout "5x" is not a duration/);
  });

  it('answers --help with the mcp help, which shows how to register the server', () => {
    expect(parseCommand(['mcp', '--help'])).toEqual({ command: 'help', topic: 'mcp' });
    const help = helpText('mcp');
    expect(help).toMatch(/^kernelwarden mcp \[options\]/);
    expect(help).toContain('claude mcp add kernelwarden -- npx -y @kernelwarden/cli mcp');
    expect(help).toContain('--hide DIR');
    expect(help).not.toContain('--lang');
    expect(help).not.toContain('--outputs-dir');
    expect(helpText()).toContain('kernelwarden mcp [options]');
  });
});

describe('mcpCommand with limits', () => {
  it('ends with exit 4 before serving anything when a limit cannot be enforced (a remote gateway)', async () => {
    let stderr = '';
    let stdout = '';
    const { stack, output } = mcp(['--gateway', 'http://127.0.0.1:9', '--memory', '1G']);
    const code = await mcpCommand(stack, output, {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
      stdin: process.stdin,
      env: {},
      cwd: '/work',
    });
    expect(code).toBe(4);
    expect(stdout).toBe('');
    expect(stderr).toBe(
      'kernelwarden mcp: --memory needs the embedded gateway: a remote gateway (http://127.0.0.1:9) launches kernels ' +
        'whose limits nothing here can enforce, so none is started\n',
    );
  });
});
