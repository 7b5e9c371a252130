import { ConfigError, type HostPort } from '../config/config.ts';
import { isDatabaseUnavailable } from '../infra/db/database.ts';

/**
 * Start-up failures a person can fix by changing a setting, said as one line that names the setting
 * (the CLI prints it and exits 2, like invalid configuration). Anything else stays a crash.
 */

const AUTH_OR_MISSING: Record<string, string> = {
  '28P01': 'the password was refused',
  '28000': 'the role may not connect',
  '3D000': 'the database does not exist',
  '3F000': 'the schema does not exist',
};

/** The URL as safe to print: no password. */
export function redactUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return 'the configured URL';
  }
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string') return code;
  // Node reports a refused connection to every address of a name as an AggregateError.
  const first = (error as { errors?: unknown[] } | undefined)?.errors?.[0];
  return first === undefined ? undefined : errorCode(first);
}

/** The database could not be opened or migrated: which setting to look at, or undefined. */
export function databaseStartupError(error: unknown, databaseUrl: string | undefined, dataDir: string): ConfigError | undefined {
  const code = errorCode(error);
  if (databaseUrl === undefined) {
    if (code === 'EACCES' || code === 'EROFS' || code === 'ENOSPC') {
      return new ConfigError('TENANTRY_DATA_DIR', `the embedded database in ${dataDir} cannot be written (${code})`);
    }
    return undefined;
  }
  const where = redactUrl(databaseUrl);
  const refused = code !== undefined ? AUTH_OR_MISSING[code] : undefined;
  if (refused) return new ConfigError('TENANTRY_DATABASE_URL', `cannot use ${where}: ${refused}`);
  // The code may sit on an inner error (AggregateError): judge it by the code found.
  const unavailable = isDatabaseUnavailable(error) || (code !== undefined && isDatabaseUnavailable(Object.assign(new Error(''), { code })));
  if (unavailable) {
    return new ConfigError(
      'TENANTRY_DATABASE_URL',
      `cannot connect to ${where} (${code ?? (error as Error).message}): is PostgreSQL running there and reachable? Unset the variable to use the embedded database`,
    );
  }
  return undefined;
}

const LISTENERS = {
  partner: { variable: 'TENANTRY_LISTEN', flag: '--listen', what: 'the partner API' },
  operator: { variable: 'TENANTRY_OPERATOR_LISTEN', flag: '--operator-listen', what: 'the operator API' },
} as const;

/** A listener could not bind: the address in use, not allowed, or not on this machine. */
export function listenStartupError(error: unknown, listener: keyof typeof LISTENERS, address: HostPort): ConfigError | undefined {
  const { variable, flag, what } = LISTENERS[listener];
  const shown = `${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}`;
  const choose = `choose another with ${variable} or ${flag} (for example ${flag} ${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port + 10})`;
  switch (errorCode(error)) {
    case 'EADDRINUSE':
      return new ConfigError(variable, `${shown} is already in use (another tenantry serve, or another program) for ${what}; ${choose}`);
    case 'EACCES':
      return new ConfigError(variable, `${shown}: permission denied (ports below 1024 need privileges) for ${what}; ${choose}`);
    case 'EADDRNOTAVAIL':
      return new ConfigError(variable, `${address.host} is not an address of this machine; ${choose}`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new ConfigError(variable, `host ${address.host} does not resolve; ${choose}`);
    default:
      return undefined;
  }
}
