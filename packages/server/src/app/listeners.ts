import { createServer, type Server } from 'node:net';
import type { Config, HostPort } from '../config/config.ts';
import { ConfigError } from '../infra/errors/config-error.ts';

/**
 * The listeners' start-up failures, kept apart from the database's: `tenantry serve` checks its ports
 * before it loads the server (or the database client), so this module loads nothing but `node:net`.
 */

/** The error's code, or the first inner error's. */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string') return code;
  // Node reports a refused connection to every address of a name as an AggregateError.
  const first = (error as { errors?: unknown[] } | undefined)?.errors?.[0];
  return first === undefined ? undefined : errorCode(first);
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

/**
 * Binds both listeners' addresses together for a moment, before the data directory or the database is
 * touched: a port another program holds (or one address given to both) is reported at once, and a first
 * start leaves nothing behind. The server binds them again when it is ready; a port taken in between is
 * reported then, the same way.
 */
export async function assertListenersFree(config: Pick<Config, 'listen' | 'operatorListen'>): Promise<void> {
  const held: Server[] = [];
  try {
    for (const [listener, address] of [
      ['partner', config.listen],
      ['operator', config.operatorListen],
    ] as const) {
      const server = createServer();
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen({ host: address.host, port: address.port, exclusive: true }, resolve);
      }).catch((error: unknown) => {
        throw listenStartupError(error, listener, address) ?? error;
      });
      held.push(server);
    }
  } finally {
    await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}
