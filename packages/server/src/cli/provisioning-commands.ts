import type { Command } from 'commander';
import { operatorClientFromEnv } from './operator-client.ts';
import { column, printRecord, printRows } from './output.ts';

/** The operator's view of provisioning: holds on customers, and operations the platform keeps failing. */
export function registerProvisioningCommands(program: Command): void {
  const customers = program.command('customers').description("the operator's hold on a partner's customers");
  const holdPath = (partner: string, customer: string, test?: boolean) =>
    `/partners/${encodeURIComponent(partner)}/customers/${encodeURIComponent(customer)}/hold?mode=${test ? 'test' : 'live'}`;

  customers
    .command('hold <partner> <customer>')
    .description("hold a customer: while held, the partner's resume answers 409 CONFLICT (audited)")
    .requiredOption('--reason <text>', 'why (recorded in the audit log and shown to the partner)')
    .option('--test', "the partner's test-mode customer")
    .option('--json', 'print JSON')
    .action(async (partner: string, customer: string, flags: { reason: string; test?: boolean; json?: boolean }) => {
      const hold = await operatorClientFromEnv().request<Record<string, unknown>>(
        'PUT',
        holdPath(partner, customer, flags.test),
        { reason: flags.reason },
        { flags: { reason: { flag: '--reason', example: '"unpaid invoice 2041"' } } },
      );
      printRecord(flags.json === true, hold);
    });

  customers
    .command('release <partner> <customer>')
    .description('release the hold: the partner may resume the customer again (audited)')
    .option('--test', "the partner's test-mode customer")
    .option('--json', 'print JSON')
    .action(async (partner: string, customer: string, flags: { test?: boolean; json?: boolean }) => {
      printRecord(
        flags.json === true,
        await operatorClientFromEnv().request<Record<string, unknown>>('DELETE', holdPath(partner, customer, flags.test)),
      );
    });

  program
    .command('operations')
    .description('provisioning operations')
    .command('stuck')
    .description('open operations whose looks keep failing (the platform does not answer, or refuses a teardown step)')
    .option('--min-failed-looks <n>', 'at least this many failed looks in a row', '5')
    .option('--json', 'print JSON')
    .action(async (flags: { minFailedLooks: string; json?: boolean }) => {
      const rows = await operatorClientFromEnv().request<Record<string, unknown>[]>(
        'GET',
        `/operations/stuck?min_failed_looks=${encodeURIComponent(flags.minFailedLooks)}`,
        undefined,
        { flags: { min_failed_looks: { flag: '--min-failed-looks', example: '5' } } },
      );
      printRows(
        flags.json === true,
        rows,
        [
          column('OPERATION', 'id'),
          column('PARTNER', 'partner_id'),
          column('MODE', 'mode'),
          column('TYPE', 'type'),
          column('CUSTOMER', 'customer_id'),
          column('LOOKS', 'failed_looks'),
          column('NEXT', 'due_at'),
          column('PROBLEM', 'last_problem'),
        ],
        rows,
      );
    });
}
