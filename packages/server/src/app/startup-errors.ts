import { ConfigError } from '../config/config.ts';
import { isDatabaseUnavailable } from '../infra/db/database.ts';
import { errorCode } from './listeners.ts';

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
