import { type Command, Option } from 'commander';
import { SCOPES } from '../partners/scopes.ts';
import { flagError, wholeNumber } from './flag-hints.ts';
import { CliError, type FlagHint, type FlagHints, operatorClientFromEnv } from './operator-client.ts';
import { column, printRecord, printRows } from './output.ts';
import { fetchAll, wait } from './progress.ts';

interface PartnerFlags {
  name?: string;
  scopes?: string;
  maxCustomers?: string;
  maxProjects?: string;
  maxOpenOperations?: string;
  usageWindowDays?: string;
  rateLimit?: string;
  allowPrivateWebhooks?: boolean;
  defaultPlan?: string;
  graceDays?: string;
  customerPrefix?: string;
  defaultProject?: string;
  portalUrl?: string;
  contactEmail?: string;
  json?: boolean;
  wait?: boolean;
}

type Partner = Record<string, unknown> & { id: string; status: string };

/** The partner body's fields by the flags that fill them, for a refused value. */
const PARTNER_FLAGS: FlagHints = {
  id: { flag: '<id>', example: 'acme' },
  display_name: { flag: '--name', example: '"Acme Cloud"' },
  scopes: { flag: '--scopes', example: 'customers:read,customers:write' },
  'limits.max_customers': { flag: '--max-customers', example: '100' },
  'limits.max_projects_per_customer': { flag: '--max-projects', example: '10' },
  'limits.max_open_operations': { flag: '--max-open-operations', example: '20' },
  'limits.max_usage_window_days': { flag: '--usage-window-days', example: '31' },
  'limits.rate_limit_per_minute': { flag: '--rate-limit', example: '120/40' },
  'limits.rate_limit_burst': { flag: '--rate-limit', example: '120/40' },
  'defaults.plan_id': { flag: '--default-plan', example: 'standard' },
  'defaults.grace_days': { flag: '--grace-days', example: '7' },
  'defaults.project': { flag: '--default-project', example: 'default' },
  portal_url: { flag: '--portal-url', example: 'https://portal.acme.example' },
  contact_email: { flag: '--contact-email', example: 'ops@acme.example' },
  customer_prefix: { flag: '--customer-prefix', example: 'acme' },
};

const PARTNER_COLUMNS = [
  column('ID', 'id'),
  column('NAME', 'display_name'),
  column('STATUS', 'status'),
  column('CUSTOMERS', 'customer_count'),
  column('RATE', 'limits.rate_limit_per_minute'),
  column('SCOPES', 'scopes'),
  // The Kube-DC Partner resource (namespace/name) that manages it (--watch-partners), or "-".
  column('MANAGED BY', 'managed_by'),
];

function settingsFlags(command: Command): Command {
  return command
    .option('--scopes <list>', `comma-separated scopes (${SCOPES.join(', ')})`)
    .option('--max-customers <n>', 'maximum customers; 0 means unlimited')
    .option('--max-projects <n>', 'maximum projects per customer')
    .option('--max-open-operations <n>', 'maximum provisioning operations in flight')
    .option('--usage-window-days <n>', 'longest usage window in one export')
    .option('--rate-limit <perMin/burst>', 'partner request rate, for example 120/40')
    .option('--default-plan <plan>', 'plan given to customers created without one')
    .option('--grace-days <n>', 'default grace period of a scheduled deletion')
    .option('--default-project <name>', "a new customer's first project when its create names none (default: default)")
    .option('--portal-url <https url>', "the partner's own portal, linked from the console; an empty value removes it")
    .option('--contact-email <email>', 'who to write to about the partner; an empty value removes it')
    .option(
      '--customer-prefix <prefix>',
      "the partner's customers are <prefix>-<customer id> on the platform: at most 16 characters, overlapping no other partner's (default: the id, cut to 16)",
    )
    .option('--json', 'print JSON');
}

export function registerPartnerCommands(program: Command): void {
  const partners = program.command('partners').description('create, read, change and suspend partners');

  settingsFlags(
    partners
      .command('create <id>')
      .description('create a partner')
      .requiredOption('--name <display name>', 'display name')
      .option('--allow-private-webhooks', 'allow webhook receivers on private addresses')
      .option('--no-wait', 'do not wait until the partner can exchange keys'),
  ).action(async (id: string, flags: PartnerFlags) => {
    const client = operatorClientFromEnv();
    let partner = await client.request<Partner>('POST', '/partners', { id, ...settingsBody(flags) }, { flags: PARTNER_FLAGS });
    if (flags.wait !== false && partner.status === 'provisioning') {
      partner = await wait(`provisioning partner ${id}`, async () => {
        const current = await client.request<Partner>('GET', `/partners/${encodeURIComponent(id)}`);
        return current.status === 'provisioning' ? undefined : current;
      });
    }
    printRecord(flags.json === true, partner);
  });

  partners
    .command('list')
    .description('list partners')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      const client = operatorClientFromEnv();
      const all = await fetchAll<Partner>('partners', (cursor) =>
        client.request('GET', `/partners?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`),
      );
      printRows(flags.json === true, all, PARTNER_COLUMNS, all);
    });

  partners
    .command('show <id>')
    .description('show one partner')
    .option('--json', 'print JSON')
    .action(async (id: string, flags: { json?: boolean }) => {
      printRecord(flags.json === true, await operatorClientFromEnv().request('GET', `/partners/${encodeURIComponent(id)}`));
    });

  settingsFlags(
    partners
      .command('update <id>')
      .description("change a partner's name, scopes, limits or defaults")
      .option('--name <display name>', 'display name')
      .addOption(new Option('--allow-private-webhooks', 'allow webhook receivers on private addresses'))
      .addOption(new Option('--no-allow-private-webhooks', 'refuse webhook receivers on private addresses')),
  ).action(async (id: string, flags: PartnerFlags) => {
    const body = settingsBody(flags);
    if (Object.keys(body).length === 0)
      throw new CliError('nothing to change: pass at least one flag (see tenantry partners update --help)', 2);
    printRecord(
      flags.json === true,
      await operatorClientFromEnv().request('PATCH', `/partners/${encodeURIComponent(id)}`, body, { flags: PARTNER_FLAGS }),
    );
  });

  for (const action of ['suspend', 'unsuspend'] as const) {
    partners
      .command(`${action} <id>`)
      .description(action === 'suspend' ? 'suspend a partner: token exchange refused, tokens refused within seconds' : 'lift a suspension')
      .option('--json', 'print JSON')
      .action(async (id: string, flags: { json?: boolean }) => {
        printRecord(flags.json === true, await operatorClientFromEnv().request('POST', `/partners/${encodeURIComponent(id)}/${action}`));
      });
  }
}

/** Turns flags into the operator API's request body, refusing malformed numbers with one line. */
export function settingsBody(flags: PartnerFlags): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const limits: Record<string, number> = {};
  const defaults: Record<string, unknown> = {};
  if (flags.name !== undefined) body.display_name = flags.name;
  if (flags.scopes !== undefined)
    body.scopes = flags.scopes
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  const int = (value: string | undefined, into: Record<string, unknown>, section: string, field: string) => {
    if (value === undefined) return;
    into[field] = wholeNumber(PARTNER_FLAGS[`${section}.${field}`] as FlagHint, value);
  };
  int(flags.maxCustomers, limits, 'limits', 'max_customers');
  int(flags.maxProjects, limits, 'limits', 'max_projects_per_customer');
  int(flags.maxOpenOperations, limits, 'limits', 'max_open_operations');
  int(flags.usageWindowDays, limits, 'limits', 'max_usage_window_days');
  if (flags.rateLimit !== undefined) {
    const match = /^(\d+)\/(\d+)$/.exec(flags.rateLimit);
    if (!match) throw flagError({ flag: '--rate-limit', example: '120/40' }, 'must be PER_MIN/BURST', flags.rateLimit);
    limits.rate_limit_per_minute = Number(match[1]);
    limits.rate_limit_burst = Number(match[2]);
  }
  if (flags.defaultPlan !== undefined) defaults.plan_id = flags.defaultPlan;
  int(flags.graceDays, defaults, 'defaults', 'grace_days');
  if (flags.defaultProject !== undefined) defaults.project = flags.defaultProject;
  if (flags.portalUrl !== undefined) body.portal_url = flags.portalUrl === '' ? null : flags.portalUrl;
  if (flags.contactEmail !== undefined) body.contact_email = flags.contactEmail === '' ? null : flags.contactEmail;
  if (Object.keys(limits).length > 0) body.limits = limits;
  if (Object.keys(defaults).length > 0) body.defaults = defaults;
  if (flags.allowPrivateWebhooks !== undefined) body.allow_private_webhooks = flags.allowPrivateWebhooks;
  if (flags.customerPrefix !== undefined) body.customer_prefix = flags.customerPrefix;
  return body;
}
