import type { Command } from 'commander';

/**
 * `tenantry listen` and `tenantry trigger`: webhooks on a laptop. Registered here, loaded when run, so
 * the other commands do not pay for the SDK and the webhook modules.
 */
export function registerListenCommands(program: Command): void {
  program
    .command('listen')
    .description("forward the partner's events to a local URL, signed like webhook deliveries (no public receiver needed)")
    .option('--api-key <key>', 'partner key (TENANTRY_API_KEY); a test key receives test events')
    .option('--forward-to <url>', 'POST each event here, signed; without it, print each event')
    .option('--events <names>', 'only these events: names or families, comma-separated (customer.*,project.ready)')
    .option('--secret <hex>', 'sign with this 64-hex secret instead of a new one each session')
    .option('--api-url <url>', 'partner API (TENANTRY_API_URL; default: the local server, http://TENANTRY_LISTEN)')
    .option('--json', 'one JSON document per line')
    .action(async (flags) => (await import('./listen.ts')).listen(flags));

  program
    .command('trigger')
    .description('make the sandbox produce a real event of this type, through the partner API (test keys only)')
    .argument('<event>', 'customer.ready, customer.failed, customer.suspended, ... (an unknown name lists them)')
    .option('--api-key <key>', 'partner test key (TENANTRY_API_KEY)')
    .option('--api-url <url>', 'partner API (TENANTRY_API_URL; default: the local server, http://TENANTRY_LISTEN)')
    .option('--json', 'print JSON')
    .action(async (event: string, flags) => (await import('./trigger.ts')).trigger(event, flags));
}
