import type { Command } from 'commander';
import { exampleExpiry, expiresAt } from './flag-hints.ts';
import { operatorClientFromEnv } from './operator-client.ts';
import { column, printRecord, printRows } from './output.ts';

const ALLOW_CIDR = { flag: '--allow-cidr', example: '203.0.113.0/24' };

export function registerKeyCommands(program: Command): void {
  const keys = program.command('keys').description("issue, list and revoke a partner's API keys");

  keys
    .command('issue <partner>')
    .description('issue an API key; it is printed once and only its hash is kept')
    .option('--test', 'a test-mode key (tnt_test_...)')
    .option('--expires-at <iso-8601>', 'expiry date and time with its zone, for example 2030-01-31T00:00:00Z')
    .option('--allow-cidr <cidr>', 'source address or CIDR allowed to use the key (repeatable)', collect, [])
    .option('--json', 'print JSON: {key, kid, mode, expires_at, allow_cidrs}')
    .action(async (partner: string, flags: { test?: boolean; expiresAt?: string; allowCidr: string[]; json?: boolean }) => {
      const body: Record<string, unknown> = { mode: flags.test ? 'test' : 'live' };
      if (flags.expiresAt !== undefined) body.expires_at = expiresAt(flags.expiresAt);
      if (flags.allowCidr.length > 0) body.allow_cidrs = flags.allowCidr;
      const issued = await operatorClientFromEnv().request<Record<string, unknown>>(
        'POST',
        `/partners/${encodeURIComponent(partner)}/keys`,
        body,
        { flags: { expires_at: { flag: '--expires-at', example: exampleExpiry() }, allow_cidrs: ALLOW_CIDR } },
      );
      if (flags.json) {
        const { key, kid, mode, expires_at, allow_cidrs } = issued;
        printRecord(true, { key, kid, mode, expires_at, allow_cidrs });
        return;
      }
      printRecord(false, issued);
      process.stderr.write('This is the only time the key is shown. Store it in your secret manager now.\n');
    });

  keys
    .command('list <partner>')
    .description("list a partner's keys (never their secrets)")
    .option('--json', 'print JSON')
    .action(async (partner: string, flags: { json?: boolean }) => {
      const rows = await operatorClientFromEnv().request<Record<string, unknown>[]>('GET', `/partners/${encodeURIComponent(partner)}/keys`);
      printRows(
        flags.json === true,
        rows,
        [
          column('KID', 'kid'),
          column('MODE', 'mode'),
          column('STATUS', 'status'),
          column('EXPIRES', 'expires_at'),
          column('ALLOW', 'allow_cidrs'),
          column('LAST USED', 'last_used_at'),
          column('CREATED', 'created_at'),
        ],
        rows,
      );
    });

  keys
    .command('revoke <partner> <kid>')
    .description('revoke a key: exchanges stop at once; issued tokens expire within 15 minutes')
    .option('--json', 'print JSON')
    .action(async (partner: string, kid: string, flags: { json?: boolean }) => {
      printRecord(
        flags.json === true,
        await operatorClientFromEnv().request('POST', `/partners/${encodeURIComponent(partner)}/keys/${encodeURIComponent(kid)}/revoke`),
      );
    });
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}
