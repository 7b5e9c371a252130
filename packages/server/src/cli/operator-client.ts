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

/** A flag (or argument) as the person typed it, and a value that works there. */
export interface FlagHint {
  flag: string;
  example: string;
}

/** The request body's fields a command's flags fill, by field path (`limits.max_customers`). */
export type FlagHints = Record<string, FlagHint>;

export interface OperatorClient {
  /** `flags`: the body's fields by the flags that fill them, so that a refused value is named by its flag. */
  request<T>(method: string, path: string, body?: unknown, options?: { flags?: FlagHints }): Promise<T>;
}

/**
 * Finds the server the way CONTRACT §3 says: TENANTRY_OPERATOR_URL and
 * TENANTRY_OPERATOR_TOKEN, else the local data directory's token and the
 * operator listen address.
 */
export function operatorClientFromEnv(env: Record<string, string | undefined> = process.env): OperatorClient {
  const baseUrl = (env.TENANTRY_OPERATOR_URL ?? `http://${env.TENANTRY_OPERATOR_LISTEN ?? '127.0.0.1:8081'}`).replace(/\/$/, '');
  let token = env.TENANTRY_OPERATOR_TOKEN;
  let source = 'TENANTRY_OPERATOR_TOKEN';
  if (!token) {
    const path = join(resolve(env.TENANTRY_DATA_DIR ?? './.tenantry'), 'operator-token');
    try {
      token = readFileSync(path, 'utf8').trim();
      source = path;
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
  return createOperatorClient(baseUrl, token, actor, source);
}

/** `tokenSource` says where the token came from, for the line that says it was refused. */
export function createOperatorClient(baseUrl: string, token: string, actor?: string, tokenSource = 'the token'): OperatorClient {
  return {
    async request<T>(method: string, path: string, body?: unknown, options: { flags?: FlagHints } = {}): Promise<T> {
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
        if (response.status === 401) {
          const fix =
            tokenSource === 'TENANTRY_OPERATOR_TOKEN'
              ? "use the value of that server's TENANTRY_OPERATOR_TOKEN, or of operator-token in its data directory"
              : "run where that server's data directory is (TENANTRY_DATA_DIR), or set TENANTRY_OPERATOR_TOKEN";
          throw new CliError(`the operator token was refused by ${baseUrl}: the token in ${tokenSource} is not that server's (${fix})`);
        }
        const fields = fieldErrors(error?.details);
        const named = error?.code === 'VALIDATION_ERROR' && options.flags ? describeFieldErrors(fields, options.flags) : undefined;
        if (named) throw new CliError(named, 2);
        const details = describeDetails(error?.details);
        throw new CliError(`${error?.code ?? `HTTP ${response.status}`}: ${error?.message ?? 'request failed'}${details}`);
      }
      return (parsed.pagination === undefined ? parsed.data : { data: parsed.data, pagination: parsed.pagination }) as T;
    },
  };
}

function fieldErrors(details: unknown): { in: string; field: string; message: string }[] {
  const errors = (details as { errors?: { in: string; field: string; message: string }[] } | undefined)?.errors;
  return Array.isArray(errors) ? errors : [];
}

function describeDetails(details: unknown): string {
  const errors = fieldErrors(details);
  if (errors.length === 0) return '';
  return ` (${errors.map((e) => `${e.field || e.in} ${e.message}`).join('; ')})`;
}

/**
 * The API's field errors said in the command's words: each field the command's flags fill is named by its
 * flag, with an example. Undefined when none of the errors is about a flag (the API's own words then).
 */
export function describeFieldErrors(errors: { field: string; message: string }[], hints: FlagHints): string | undefined {
  const hinted = errors.map((error) => ({ error, hint: hintFor(error.field, hints) }));
  if (!hinted.some(({ hint }) => hint)) return undefined;
  const example = (hint: FlagHint) => (hint.flag.startsWith('<') ? hint.example : `${hint.flag} ${hint.example}`);
  return hinted
    .map(({ error, hint }) => (hint ? `${hint.flag} ${error.message}, for example ${example(hint)}` : `${error.field} ${error.message}`))
    .join('; ');
}

/** The hint of a field or of the nearest field that holds it (`allow_cidrs.0` is `allow_cidrs`'s). */
function hintFor(field: string, hints: FlagHints): FlagHint | undefined {
  for (let path = field; path; path = path.includes('.') ? path.slice(0, path.lastIndexOf('.')) : '') {
    const hint = hints[path];
    if (hint) return hint;
  }
  return undefined;
}
