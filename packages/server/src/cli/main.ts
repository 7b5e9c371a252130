#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { useCompileCache } from '../../bin/compile-cache.js';
import { hideSecretArguments } from '../../bin/process-title.js';
import { registerCapacityCommands } from './capacity-commands.ts';
import { flagError, wholeNumber } from './flag-hints.ts';
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
// `ps` shows no secret given as a flag (`--api-key`, `--secret`) while the command runs.
hideSecretArguments(process.argv.slice(2));

const program = new Command('tenantry')
  .description('Tenantry: partner provisioning platform. Serve it, and operate partners, keys and the audit log.')
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
    const max = wholeNumber({ flag: '--limit', example: '100' }, flags.limit);
    if (max < 1) throw flagError({ flag: '--limit', example: '100' }, 'must be at least 1', flags.limit);
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

// A command line commander refuses (an unknown option or command, a missing argument) is one line, like a
// refused value: what is wrong, and the help that says how to call that command; exit 2. Commander's own
// output of it is replaced, here on every command, since each keeps its own output settings.
let misused: Command | undefined;
const everyCommand = (command: Command): Command[] => [command, ...command.commands.flatMap(everyCommand)];
for (const command of everyCommand(program)) {
  command.configureOutput({
    outputError: () => {
      misused = command;
    },
  });
}
const commandPath = (command: Command): string => (command.parent ? `${commandPath(command.parent)} ${command.name()}` : command.name());

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    if (!misused) process.exit(error.exitCode);
    const message = error.message.replace(/^error: /, '').replace(/\s*\n\s*/g, ' ');
    process.stderr.write(`tenantry: ${message}; see ${commandPath(misused)} --help\n`);
    process.exit(2);
  }
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`tenantry: ${message}\n`);
  process.exit(error instanceof CliError ? error.exitCode : 1);
}
