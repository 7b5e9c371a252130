#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { type Config, ConfigError, loadConfig } from '../config/config.ts';
import { registerImageCommands } from '../images/validate-command.ts';
import { registerCapacityCommands } from './capacity-commands.ts';
import { registerKeyCommands } from './key-commands.ts';
import { CliError, operatorClientFromEnv } from './operator-client.ts';
import { column, printRows } from './output.ts';
import { registerPartnerCommands } from './partner-commands.ts';
import { fetchAll } from './progress.ts';
import { registerSecretKeyCommands } from './secret-key-commands.ts';

const program = new Command('tenantry')
  .description('Tenantry: partner provisioning platform. Serve it, and operate partners, keys and the audit log.')
  .showHelpAfterError()
  .exitOverride();

program
  .command('serve')
  .description('serve the partner API, the operator API and background work')
  .option('--listen <host:port>', 'partner API address (TENANTRY_LISTEN)')
  .option('--operator-listen <host:port>', 'operator API address (TENANTRY_OPERATOR_LISTEN)')
  .option('--data-dir <dir>', 'embedded database and operator token (TENANTRY_DATA_DIR)')
  .option('--database-url <url>', 'postgres:// URL instead of the embedded database (TENANTRY_DATABASE_URL)')
  .option('--fix-permissions', 'make the data directory owner-only instead of refusing to start (TENANTRY_FIX_PERMISSIONS)')
  .action(async (flags: { listen?: string; operatorListen?: string; dataDir?: string; databaseUrl?: string; fixPermissions?: boolean }) => {
    // Everything this process writes (database files, tokens, keys) is for its owner only.
    process.umask(0o077);
    let config: Config;
    try {
      config = loadConfig(process.env, {
        TENANTRY_LISTEN: flags.listen,
        TENANTRY_OPERATOR_LISTEN: flags.operatorListen,
        TENANTRY_DATA_DIR: flags.dataDir,
        TENANTRY_DATABASE_URL: flags.databaseUrl,
        TENANTRY_FIX_PERMISSIONS: flags.fixPermissions ? 'true' : undefined,
      });
    } catch (error) {
      if (error instanceof ConfigError) throw new CliError(`invalid configuration: ${error.message}`, 2);
      throw error;
    }
    // Loaded on demand: the operator commands stay quick to start.
    const { startServer } = await import('../app/server.ts');
    const { EmbeddedDatabaseLockedError } = await import('../infra/db/embedded-lock.ts');
    const starting = startServer(config).catch((error: unknown) => {
      if (error instanceof ConfigError) throw new CliError(`invalid configuration: ${error.message}`, 2);
      if (error instanceof EmbeddedDatabaseLockedError) throw new CliError(error.message, 1);
      throw error;
    });
    // Listening for signals before the server is up: a SIGTERM that arrives while it starts still
    // drains and closes it (the embedded database's lock is released), rather than killing it.
    let stopping = false;
    const stop = (signal: string) => {
      if (stopping) return;
      stopping = true;
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
    await starting;
  });

registerPartnerCommands(program);
registerKeyCommands(program);
registerCapacityCommands(program);
registerSecretKeyCommands(program);
(await import('./endpoint-manager-command.ts')).registerEndpointManagerCommand(program);
registerImageCommands(program);

program
  .command('audit')
  .description('the operator audit log, newest first')
  .option('--partner <id>', 'only changes to this partner')
  .option('--limit <n>', 'how many entries', '50')
  .option('--json', 'print JSON')
  .action(async (flags: { partner?: string; limit: string; json?: boolean }) => {
    if (!/^\d+$/.test(flags.limit) || Number(flags.limit) < 1)
      throw new CliError(`--limit must be a positive whole number, got "${flags.limit}"`, 2);
    const max = Number(flags.limit);
    const client = operatorClientFromEnv();
    const entries = await fetchAll<Record<string, unknown>>(
      'audit entries',
      (cursor) => {
        const query = new URLSearchParams({ limit: String(Math.min(200, max)) });
        if (flags.partner) query.set('partner', flags.partner);
        if (cursor) query.set('cursor', cursor);
        return client.request('GET', `/audit?${query.toString()}`);
      },
      max,
    );
    printRows(
      flags.json === true,
      entries,
      [
        column('AT', 'at'),
        column('ACTOR', 'actor'),
        column('ACTION', 'action'),
        column('TARGET', 'target'),
        column('REQUEST', 'request_id'),
      ],
      entries,
    );
  });

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) process.exit(error.exitCode);
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`tenantry: ${message}\n`);
  process.exit(error instanceof CliError ? error.exitCode : 1);
}
