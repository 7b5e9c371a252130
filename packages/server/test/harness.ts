import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyPluginAsync } from 'fastify';
import pg from 'pg';
import pino from 'pino';
import { type AppDatabase as DatabaseHandle, openAppDatabase as openDatabase } from '../src/app/database.ts';
import { type RunningServer, type StartOptions, startServer } from '../src/app/server.ts';
import type { Services } from '../src/app/services.ts';
import { loadConfig } from '../src/config/config.ts';
import type { EventStreamOptions } from '../src/events/stream.ts';
import { ManualClock } from '../src/infra/clock.ts';
import { platformDrivers } from '../src/platform/drivers.ts';
import type { Resolver } from '../src/webhooks/destination.ts';

/**
 * The databases every integration suite runs on: PGlite always, and the
 * PostgreSQL server named by TENANTRY_TEST_DATABASE_URL when it is set (each
 * suite gets a fresh database there, dropped afterwards).
 */
export interface TestDatabase {
  name: 'pglite' | 'postgres';
  /** A fresh, empty database. */
  create(): Promise<{ handle: DatabaseHandle; url: string | undefined; drop(): Promise<void> }>;
}

export const SERVER_DATABASE_URL = process.env.TENANTRY_TEST_DATABASE_URL;

export function testDatabases(): TestDatabase[] {
  const targets: TestDatabase[] = [
    {
      name: 'pglite',
      create: async () => {
        const handle = await openDatabase({ kind: 'embedded', dataDir: undefined });
        return { handle, url: undefined, drop: () => handle.close() };
      },
    },
  ];
  if (SERVER_DATABASE_URL) {
    targets.push({
      name: 'postgres',
      create: async () => {
        const url = await createServerDatabase();
        const handle = await openDatabase({ kind: 'postgres', url });
        return {
          handle,
          url,
          drop: async () => {
            await handle.close();
            await dropServerDatabase(url);
          },
        };
      },
    });
  }
  return targets;
}

/** A new empty database on the PostgreSQL test server; its URL. */
export async function createServerDatabase(): Promise<string> {
  if (!SERVER_DATABASE_URL) throw new Error('TENANTRY_TEST_DATABASE_URL is not set');
  const name = `tenantry_t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: SERVER_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(SERVER_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropServerDatabase(url: string): Promise<void> {
  if (!SERVER_DATABASE_URL) return;
  const name = new URL(url).pathname.slice(1);
  const admin = new pg.Client({ connectionString: SERVER_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`drop database if exists ${name} with (force)`);
  } finally {
    await admin.end();
  }
}

export interface TestServer extends RunningServer {
  clock: ManualClock;
  database: DatabaseHandle;
  databaseUrl: string | undefined;
  /** Every log line the server wrote, parsed. */
  logs: Record<string, unknown>[];
  /** The raw log output, for "never a secret in a log line" checks. */
  rawLogs(): string;
  /** Stops the server and drops its database. */
  stop(): Promise<void>;
}

export interface TestServerOptions {
  env?: Record<string, string>;
  /** The captured log's level (default info, the server's own default). */
  logLevel?: pino.Level;
  partnerRoutes?: FastifyPluginAsync<{ services: Services }>[];
  clock?: ManualClock;
  sandboxAddressRanges?: number;
  /** How webhook hosts resolve (default: the system resolver). */
  webhookResolver?: Resolver;
  /** The event stream's timing (default here: polls every 20 ms). */
  eventStreams?: Partial<EventStreamOptions>;
  /** The live platform, given the sandbox (a platform that misbehaves, for tests of how the core copes). */
  livePlatform?: StartOptions['livePlatform'];
  /** How often the embedded database's upkeep runs (default: the server's minute). */
  upkeepIntervalMs?: number;
}

/** A real server on ephemeral loopback ports, on a fresh database, with a manual clock and captured logs. */
export async function startTestServer(target: TestDatabase, options: TestServerOptions = {}): Promise<TestServer> {
  const { handle, url, drop } = await target.create();
  const clock = options.clock ?? new ManualClock(Date.now());
  const chunks: string[] = [];
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      const text = chunk.toString('utf8');
      chunks.push(text);
      for (const line of text.split('\n')) if (line.trim()) logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const config = loadConfig(platformDrivers, {
    TENANTRY_LISTEN: '127.0.0.1:0',
    TENANTRY_OPERATOR_LISTEN: '127.0.0.1:0',
    TENANTRY_OPERATOR_TOKEN: randomBytes(24).toString('hex'),
    TENANTRY_SECRET_KEY: randomBytes(32).toString('hex'),
    TENANTRY_SANDBOX_DELAY_MS: '0',
    TENANTRY_DATA_DIR: '/nonexistent-test-data-dir',
    // The server opens nothing itself (it is handed the database), but its settings say which kind it runs on.
    ...(url ? { TENANTRY_DATABASE_URL: url } : {}),
    ...options.env,
  });
  const server = await startServer(config, {
    clock,
    database: handle,
    logger: pino({ level: options.logLevel ?? 'info' }, sink),
    ...(options.partnerRoutes ? { partnerRoutes: options.partnerRoutes } : {}),
    ...(options.sandboxAddressRanges !== undefined ? { sandboxAddressRanges: options.sandboxAddressRanges } : {}),
    // Tests move a manual clock and then read; a short poll keeps the background engine close behind.
    enginePollMs: 20,
    webhookPollMs: 20,
    ...(options.webhookResolver ? { webhookResolver: options.webhookResolver } : {}),
    ...(options.livePlatform ? { livePlatform: options.livePlatform } : {}),
    ...(options.upkeepIntervalMs !== undefined ? { upkeepIntervalMs: options.upkeepIntervalMs } : {}),
    eventStreams: { pollMs: 20, ...options.eventStreams },
  });
  return {
    ...server,
    clock,
    database: handle,
    databaseUrl: url,
    logs,
    rawLogs: () => chunks.join(''),
    stop: async () => {
      await server.close();
      await drop();
    },
  };
}
