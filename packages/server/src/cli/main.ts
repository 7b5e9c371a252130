#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { useCompileCache } from '../../bin/compile-cache.js';
import { registerCapacityCommands } from './capacity-commands.ts';
import { registerImageCommands } from './image-commands.ts';
import { registerKeyCommands } from './key-commands.ts';
import { registerListenCommands } from './listen-commands.ts';
import { CliError, operatorClientFromEnv } from './operator-client.ts';
import { column, printRows } from './output.ts';
import { registerPartnerCommands } from './partner-commands.ts';
import { fetchAll } from './progress.ts';
import { registerProvisioningCommands } from './provisioning-commands.ts';
import { registerSecretKeyCommands } from './secret-key-commands.ts';
import { registerServeCommand } from './serve-command.ts';

// Before the modules a command loads on demand (the server, Kubernetes, bootstrap) are compiled (the
// `tenantry` command turned it on already, before this file; `node src/cli/main.ts` turns it on here).
useCompileCache();

const program = new Command('tenantry')
  .description('Tenantry: partner provisioning platform. Serve it, and operate partners, keys and the audit log.')
  .showHelpAfterError()
  .exitOverride();

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
program.version(`tenantry ${version} (Node.js ${process.version})`, '-V, --version', 'print the version');

registerServeCommand(program);
registerPartnerCommands(program);
registerKeyCommands(program);
registerCapacityCommands(program);
registerSecretKeyCommands(program);
registerProvisioningCommands(program);
(await import('./endpoint-manager-command.ts')).registerEndpointManagerCommand(program);
(await import('./bootstrap-commands.ts')).registerBootstrapCommands(program);
registerListenCommands(program);
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
