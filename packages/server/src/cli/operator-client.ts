import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join, resolve } from 'node:path';

/** An operator API failure, as one line for the terminal. */
export class CliError extends Error {
  readonly exitCode: number;

  constructor(message: string, exitCode = 1) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

export interface OperatorClient {
  request<T>(method: string, path: string, body?: unknown): Promise<T>;
}

/**
 * Finds the server the way CONTRACT §3 says: TENANTRY_OPERATOR_URL and
 * TENANTRY_OPERATOR_TOKEN, else the local data directory's token and the
 * operator listen address.
 */
export function operatorClientFromEnv(env: Record<string, string | undefined> = process.env): OperatorClient {
  const baseUrl = (env.TENANTRY_OPERATOR_URL ?? `http://${env.TENANTRY_OPERATOR_LISTEN ?? '127.0.0.1:8081'}`).replace(/\/$/, '');
  let token = env.TENANTRY_OPERATOR_TOKEN;
  if (!token) {
    const path = join(resolve(env.TENANTRY_DATA_DIR ?? './.tenantry'), 'operator-token');
    try {
      token = readFileSync(path, 'utf8').trim();
    } catch {
      throw new CliError(`no operator token: set TENANTRY_OPERATOR_TOKEN, or run where ${path} exists (tenantry serve creates it)`);
    }
  }
  let actor = env.TENANTRY_ACTOR;
  if (!actor) {
    try {
      actor = userInfo().username;
    } catch {
      actor = undefined;
    }
  }
  return createOperatorClient(baseUrl, token, actor);
}

export function createOperatorClient(baseUrl: string, token: string, actor?: string): OperatorClient {
  return {
    async request<T>(method: string, path: string, body?: unknown): Promise<T> {
      const headers: Record<string, string> = { authorization: `Bearer ${token}` };
      if (actor) headers['x-tenantry-actor'] = actor;
      if (body !== undefined) headers['content-type'] = 'application/json';
      let response: Response;
      try {
        response = await fetch(`${baseUrl}/api/operator/v1${path}`, {
          method,
          headers,
          ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        });
      } catch (error) {
        const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
        throw new CliError(`cannot reach the operator API at ${baseUrl} (${cause}); is tenantry serve running?`);
      }
      const text = await response.text();
      let parsed: { status?: string; data?: unknown; pagination?: unknown; error?: { code: string; message: string; details?: unknown } };
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new CliError(`unexpected answer from ${baseUrl} (HTTP ${response.status})`);
      }
      if (!response.ok || parsed.status !== 'success') {
        const error = parsed.error;
        const details = describeDetails(error?.details);
        throw new CliError(`${error?.code ?? `HTTP ${response.status}`}: ${error?.message ?? 'request failed'}${details}`);
      }
      return (parsed.pagination === undefined ? parsed.data : { data: parsed.data, pagination: parsed.pagination }) as T;
    },
  };
}

function describeDetails(details: unknown): string {
  const errors = (details as { errors?: { in: string; field: string; message: string }[] } | undefined)?.errors;
  if (!Array.isArray(errors) || errors.length === 0) return '';
  return ` (${errors.map((e) => `${e.field || e.in} ${e.message}`).join('; ')})`;
}
