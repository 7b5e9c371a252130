import { Tenantry, TenantryConnectionError, TenantryTimeoutError } from '../../../sdk/src/index.ts';
import { CliError } from './operator-client.ts';

/**
 * `tenantry listen` and `tenantry trigger` act as a partner: the SDK with a partner key, against the
 * partner API (`--api-url`, else TENANTRY_API_URL, TENANTRY_PUBLIC_URL, or the local TENANTRY_LISTEN).
 * The SDK is imported from its sources: the CLI runs TypeScript on Node 24 and must not depend on a
 * build of it.
 */
export interface PartnerFlags {
  apiKey?: string;
  apiUrl?: string;
}

export interface PartnerClient {
  client: Tenantry;
  baseUrl: string;
}

export function partnerClient(flags: PartnerFlags, env: Record<string, string | undefined> = process.env): PartnerClient {
  const apiKey = flags.apiKey ?? env.TENANTRY_API_KEY;
  if (!apiKey) throw new CliError('no API key: pass --api-key tnt_test_... or set TENANTRY_API_KEY', 2);
  if (apiKey.startsWith('tnt_at_'))
    throw new CliError(
      '--api-key takes the API key (tnt_live_... or tnt_test_...), not an access token: the CLI exchanges the key itself',
      2,
    );
  if (!/^tnt_(live|test)_/.test(apiKey)) throw new CliError('--api-key must be a Tenantry key (tnt_live_... or tnt_test_...)', 2);
  const raw = flags.apiUrl ?? env.TENANTRY_API_URL ?? env.TENANTRY_PUBLIC_URL ?? `http://${env.TENANTRY_LISTEN ?? '127.0.0.1:8080'}`;
  let baseUrl: string;
  try {
    baseUrl = new URL(raw).origin;
  } catch {
    throw new CliError(`--api-url must be an http:// or https:// URL, got "${raw}"`, 2);
  }
  return { client: new Tenantry({ apiKey, baseUrl }), baseUrl };
}

/** The SDK's errors and fetch failures as one line for the terminal. */
export function describeFailure(error: unknown, baseUrl: string): CliError {
  if (error instanceof CliError) return error;
  if (error instanceof TenantryConnectionError && !(error instanceof TenantryTimeoutError)) {
    return new CliError(
      `cannot reach the partner API at ${baseUrl} (${networkCode(error.cause) ?? error.message}); is tenantry serve running?`,
    );
  }
  const err = error as { code?: string; message?: string };
  return new CliError(err.code ? `${err.code}: ${err.message}` : String(err.message ?? error));
}

/** The system's code for a failed connection: fetch nests it (`fetch failed` ← `ECONNREFUSED`, or an AggregateError's errors). */
function networkCode(cause: unknown): string | undefined {
  let current = cause as { code?: unknown; errors?: { code?: unknown }[]; cause?: unknown } | undefined;
  let code: string | undefined;
  while (current && typeof current === 'object') {
    const found = current.code ?? current.errors?.[0]?.code;
    if (typeof found === 'string') code = found;
    current = current.cause as typeof current;
  }
  return code;
}
