import type { Command } from 'commander';
import { type Config, ConfigError, loadConfig } from '../config/config.ts';
import { SETTINGS, type Setting, settingsHelp } from '../config/settings.ts';
import { platformDrivers } from '../platform/drivers.ts';
import { CliError } from './operator-client.ts';

/** `--database-url <url>` → `databaseUrl`, the key commander gives the flag's value. */
const flagKey = (flag: string) => (flag.split(' ')[0] ?? '').replace(/^--/, '').replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
/** How long after it starts serving the server gives its start-up's memory back, at the earliest. */
const RELEASE_AFTER_SERVING_MS = 1_000;
const FLAGGED = SETTINGS.filter((s: Setting) => s.flag !== undefined) as (Setting & { flag: string })[];

export function registerServeCommand(program: Command): void {
  const serve = program
    .command('serve')
    .description('serve the partner API, the operator API and background work')
    .addHelpText('after', settingsHelp());
  for (const setting of FLAGGED) serve.option(setting.flag, `${setting.description} (${setting.variable})`);
  serve.action(async (flags: Record<string, string | boolean | undefined>) => {
    // Everything this process writes (database files, tokens, keys) is for its owner only.
    process.umask(0o077);
    const flagValue = (setting: { flag: string }) => {
      const value = flags[flagKey(setting.flag)];
      return value === undefined ? undefined : String(value);
    };
    let config: Config;
    try {
      config = loadConfig(platformDrivers, process.env, Object.fromEntries(FLAGGED.map((s) => [s.variable, flagValue(s)])));
    } catch (error) {
      // One line per problem, each naming its setting (the CLI prefixes the first with "tenantry: ").
      if (error instanceof ConfigError)
        throw new CliError(
          error.message
            .split('\n')
            .map((line) => `invalid configuration: ${line}`)
            .join('\ntenantry: '),
          2,
        );
      throw error;
    }
    // The ports first: a taken one is refused at once, before a new database is made for a server that
    // cannot serve (and left behind in a new data directory).
    const { assertListenersFree } = await import('../app/listeners.ts');
    await assertListenersFree(config).catch((error: unknown) => {
      if (error instanceof ConfigError) throw new CliError(`cannot start: ${error.message}`, 2);
      throw error;
    });
    // Loaded on demand: the operator commands stay quick to start.
    const { limitHeapGrowth, releaseStartupMemory, whenQuiet } = await import('../infra/process-memory.ts');
    limitHeapGrowth();
    // A new embedded database is made by a child process while this one loads the server.
    const { makeNewEmbeddedDatabaseApart } = await import('../app/new-embedded-database.ts');
    const embeddedMade = config.databaseUrl === undefined ? makeNewEmbeddedDatabaseApart(config.dataDir) : undefined;
    // The embedded database's WebAssembly compiles on V8's background threads while the server's modules
    // load; a failure is reported when the database opens.
    if (config.databaseUrl === undefined) {
      const { compilePGlite } = await import('../infra/db/pglite-pool.ts');
      compilePGlite().catch(() => {});
    }
    const { startServer } = await import('../app/server.ts');
    const { EmbeddedDatabaseLockedError } = await import('../infra/db/embedded-lock.ts');
    const starting = startServer(config, { embeddedMade }).catch((error: unknown) => {
      // A setting that does not work here (database unreachable, port in use, data directory open to
      // others, another process on the embedded database): one line, as above.
      if (error instanceof ConfigError) throw new CliError(`cannot start: ${error.message}`, 2);
      if (error instanceof EmbeddedDatabaseLockedError) throw new CliError(`cannot start: ${error.message}`, 1);
      throw error;
    });
    // Listening for signals before the server is up: a SIGTERM that arrives while it starts still
    // drains and closes it (the embedded database's lock is released), rather than killing it.
    const stopping = new AbortController();
    const stop = (signal: string) => {
      if (stopping.signal.aborted) return;
      stopping.abort();
      process.stderr.write(`tenantry: ${signal} received, draining requests\n`);
      starting
        .then((server) => server.close())
        .then(
          () => process.exit(0),
          (error: unknown) => {
            process.stderr.write(`tenantry: shutdown failed: ${(error as Error).message}\n`);
            process.exit(1);
          },
        );
    };
    process.on('SIGTERM', () => stop('SIGTERM'));
    process.on('SIGINT', () => stop('SIGINT'));
    const server = await starting;
    // Once the schemas are compiled, a second after serving at the earliest, and in the first quiet
    // quarter of a second: the first requests (the readiness probe among them) and a burst that came with
    // the start are not held behind the collection's 70-100 ms.
    const earliest = new Promise((resolve) => setTimeout(resolve, RELEASE_AFTER_SERVING_MS).unref());
    void Promise.all([earliest, server.schemasWarmed])
      .then(() => whenQuiet({ signal: stopping.signal }))
      .then((quiet) => {
        if (!quiet) return;
        const ms = releaseStartupMemory();
        if (ms !== undefined) server.services.options.logger.info({ ms: Math.round(ms) }, 'start-up memory released');
      });
  });
}
