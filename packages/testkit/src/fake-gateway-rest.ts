import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FakeKernelSpec, RecordedRequest } from './fake-gateway-types.js';

/** A request body as JSON, else as text; undefined when empty. */
export function parseBody(raw: Buffer): unknown {
  if (!raw.length) return undefined;
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    return raw.toString('utf8');
  }
}

/** How a request authenticated: by header, by `?token=`, wrongly, or not at all. */
export function authOf(req: IncomingMessage, url: URL, token: string | undefined): RecordedRequest['auth'] {
  const header = req.headers.authorization;
  const query = url.searchParams.get('token');
  if (header !== undefined) return header === `token ${token}` ? 'header' : 'bad';
  if (query !== null) return query === token ? 'query' : 'bad';
  return 'none';
}

/** Answers with `status` and `body` as JSON (no body for 204 or `undefined`), and records the status. */
export function writeJson(res: ServerResponse, record: RecordedRequest, status: number, body: unknown): void {
  record.answer = status;
  if (res.destroyed) return;
  if (status === 204 || body === undefined) {
    res.writeHead(status).end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) }).end(text);
}

/** `GET /api/kernelspecs`'s answer. */
export function kernelSpecsModel(specs: Record<string, FakeKernelSpec>, defaultName: string): Record<string, unknown> {
  const kernelspecs: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(specs)) {
    kernelspecs[name] = {
      name,
      spec: {
        argv: spec.argv ?? ['python', '-m', 'ipykernel_launcher', '-f', '{connection_file}'],
        env: spec.env ?? {},
        display_name: spec.displayName ?? name,
        language: spec.language ?? 'python',
        interrupt_mode: 'signal',
        metadata: {},
      },
      resources: {},
    };
  }
  return { default: defaultName, kernelspecs };
}
