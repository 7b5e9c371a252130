import { type Command, Option } from 'commander';
import type { AnchorOptions } from '../bootstrap/anchors/commands.ts';
import * as D from '../bootstrap/defaults.ts';
import type { BootstrapKube } from '../bootstrap/kube.ts';
import type { ExitCode, Io } from '../bootstrap/output.ts';
import type { ResolverOptions } from '../bootstrap/resolvers/commands.ts';
import { CliError } from './operator-client.ts';

interface CommonFlags {
  kubeconfig?: string;
  context?: string;
  config?: string;
  configmap?: string;
  json?: boolean;
  pollMs?: string;
}

const collect = (value: string, previous: string[]) => [...previous, value];

function whole(flag: string, value: string, min: number): number {
  if (!/^\d+$/.test(value) || Number(value) < min)
    throw new CliError(`${flag} must be a whole number of at least ${min}, got "${value}"`, 2);
  return Number(value);
}

function common(command: Command): Command {
  return command
    .option('--kubeconfig <file>', 'kubeconfig file (default: KUBECONFIG, ~/.kube/config, or the in-cluster service account)')
    .option('--context <name>', 'kubeconfig context to use')
    .option('--json', 'print JSON for scripts')
    .addOption(new Option('--poll-ms <ms>', 'how often to poll long work').default('1000').hideHelp());
}

function configFlags(command: Command): Command {
  return command
    .option('--config <file>', "the operator's cluster configuration file (cluster-config.env, or a ConfigMap manifest)")
    .option('--configmap <namespace/name>', `the cluster configuration ConfigMap (default: ${D.DEFAULT_CONFIGMAP})`);
}

/**
 * Runs a bootstrap command: the Kubernetes client and the modules load on demand (the other commands stay
 * quick to start); a BootstrapError is one line on stderr and its exit code; an API or network failure that
 * escaped a command means the cluster could not be read (3).
 */
async function run(flags: CommonFlags, body: (kube: BootstrapKube, io: Io) => Promise<ExitCode>): Promise<void> {
  const { BootstrapKube, loadKubeConfig, describe } = await import('../bootstrap/kube.ts');
  const { BootstrapError, processIo } = await import('../bootstrap/output.ts');
  const { ApiException } = await import('@kubernetes/client-node');
  const io = processIo();
  try {
    const kube = new BootstrapKube(
      loadKubeConfig({
        ...(flags.kubeconfig ? { kubeconfig: flags.kubeconfig } : {}),
        ...(flags.context ? { context: flags.context } : {}),
      }),
    );
    process.exitCode = await body(kube, io);
  } catch (error) {
    io.progressDone();
    if (error instanceof BootstrapError) {
      io.err(`tenantry: ${error.message}\n`);
      process.exitCode = error.exitCode;
    } else if (error instanceof ApiException || (error as { cause?: unknown }).cause !== undefined) {
      io.err(`tenantry: cannot read the cluster: ${describe(error)}\n`);
      process.exitCode = 3;
    } else throw error;
  }
}

function configOptions(flags: CommonFlags) {
  return {
    ...(flags.config ? { config: flags.config } : {}),
    ...(flags.configmap ? { configmap: flags.configmap } : {}),
    json: flags.json === true,
  };
}

interface AnchorFlags extends CommonFlags {
  namespace: string;
  image: string;
  interface?: string;
  northboundListing?: string;
  timeout: string;
  bridgeTimeout: string;
  keepJobs?: boolean;
  dryRun?: boolean;
}

function anchorFlags(command: Command): Command {
  return configFlags(common(command))
    .option('--namespace <ns>', 'namespace the per-node Jobs run in (must allow host-network pods)', D.DEFAULT_JOB_NAMESPACE)
    .option('--image <image>', 'image of the per-node Jobs (needs sh, ip, awk and cmp)', D.DEFAULT_JOB_IMAGE)
    .option('--interface <name>', 'the external bridge (default: EXT_NET_ANCHOR_INTERFACE, else br-ext-cloud)')
    .option(
      '--northbound-listing <file>',
      'output of `ovn-nbctl --columns=name,networks list logical_router_port`, for router ports without a Kube-OVN resource',
    )
    .option('--timeout <seconds>', 'how long to wait for each node', String(D.DEFAULT_NODE_TIMEOUT_SECONDS))
    .option('--bridge-timeout <seconds>', 'how long a node waits for its bridge to exist', String(D.DEFAULT_BRIDGE_TIMEOUT_SECONDS))
    .option('--keep-jobs', 'keep the Jobs that succeeded (failed ones are always kept)');
}

async function anchorOptions(flags: AnchorFlags): Promise<AnchorOptions> {
  const { systemScheduler } = await import('../infra/scheduler.ts');
  return {
    ...configOptions(flags),
    namespace: flags.namespace,
    image: flags.image,
    ...(flags.interface ? { interface: flags.interface } : {}),
    ...(flags.northboundListing ? { northboundListing: flags.northboundListing } : {}),
    timeoutSeconds: whole('--timeout', flags.timeout, 1),
    bridgeTimeoutSeconds: whole('--bridge-timeout', flags.bridgeTimeout, 1),
    pollMs: whole('--poll-ms', flags.pollMs ?? '1000', 1),
    keepJobs: flags.keepJobs === true,
    dryRun: flags.dryRun === true,
    scheduler: systemScheduler,
  };
}

interface ResolverFlags extends CommonFlags {
  values: string[];
  selector: string;
  namespace?: string;
  corefileConfigmap: string[];
  ttl: string;
  timeout: string;
  dryRun?: boolean;
}

function resolverCommand(parent: Command, mode: 'apply' | 'remove', description: string): void {
  const command = configFlags(common(parent.command(mode).description(description)))
    .option('--values <file>', 'chart values file with platform.hostnames (repeatable; later files win)', collect, [])
    .option('--selector <labels>', 'label selector of the per-project resolver Deployments', D.RESOLVER_SELECTOR)
    .option('--namespace <ns>', 'only resolvers in this namespace (default: all)')
    .option(
      '--corefile-configmap <namespace/name>',
      'a resolver configuration to edit even if no resolver mounts it yet (repeatable)',
      collect,
      [],
    )
    .option('--timeout <seconds>', 'how long to wait for each rollout', String(D.DEFAULT_ROLLOUT_TIMEOUT_SECONDS))
    .option('--dry-run', 'print the entries and the changes, change nothing');
  if (mode === 'apply') command.option('--ttl <seconds>', 'TTL of the hosts answers', String(D.DEFAULT_TTL_SECONDS));
  command.action(async (flags: ResolverFlags) => {
    const { systemScheduler } = await import('../infra/scheduler.ts');
    const options: ResolverOptions = {
      ...configOptions(flags),
      values: flags.values,
      selector: flags.selector,
      ...(flags.namespace ? { namespace: flags.namespace } : {}),
      corefileConfigMaps: flags.corefileConfigmap.length > 0 ? flags.corefileConfigmap : [D.DEFAULT_COREFILE_CONFIGMAP],
      ttl: whole('--ttl', flags.ttl ?? String(D.DEFAULT_TTL_SECONDS), 1),
      timeoutSeconds: whole('--timeout', flags.timeout, 1),
      pollMs: whole('--poll-ms', flags.pollMs ?? '1000', 1),
      dryRun: flags.dryRun === true,
      scheduler: systemScheduler,
    };
    await run(flags, async (kube, io) => (await import('../bootstrap/resolvers/commands.ts')).resolvers(kube, mode, options, io));
  });
}

/** `tenantry bootstrap ...`: the operator's commands for the internal platform endpoints (docs/bootstrap.md). */
export function registerBootstrapCommands(program: Command): void {
  const bootstrap = program
    .command('bootstrap')
    .description('check and prepare a cluster for the internal platform endpoints (docs/bootstrap.md)');
  const doctor = bootstrap.command('doctor').description('read-only checks');

  configFlags(
    common(
      doctor.command('topology').description('classify the cluster (A, B, C) and say whether the internal platform endpoints are needed'),
    ),
  )
    .option('--values <file>', 'chart values file (login host, gateway namespace; repeatable)', collect, [])
    .option('--gateway-namespace <ns>', "the edge gateway's namespace (default: the chart's, envoy-gateway-system)")
    .option('--gateway-service <namespace/name>', 'the gateway Service, when it is not labelled by Envoy Gateway')
    .option('--project-namespace <ns>', 'a project namespace, for the manual test command')
    .option('--login-host <host>', "the identity provider's hostname, for the manual test (default: platform.hostnames.login)")
    .option('--well-known-path <path>', "the identity provider's discovery path", D.DEFAULT_WELL_KNOWN_PATH)
    .option('--image <image>', 'image of the manual test pod', D.DEFAULT_DIAGNOSTIC_IMAGE)
    .action(
      async (
        flags: CommonFlags & {
          values: string[];
          gatewayNamespace?: string;
          gatewayService?: string;
          projectNamespace?: string;
          loginHost?: string;
          wellKnownPath: string;
          image: string;
        },
      ) => {
        await run(flags, async (kube, io) =>
          (await import('../bootstrap/topology/doctor.ts')).doctorTopology(
            kube,
            {
              ...configOptions(flags),
              values: flags.values,
              ...(flags.gatewayNamespace ? { gatewayNamespace: flags.gatewayNamespace } : {}),
              ...(flags.gatewayService ? { gatewayService: flags.gatewayService } : {}),
              ...(flags.projectNamespace ? { projectNamespace: flags.projectNamespace } : {}),
              ...(flags.loginHost ? { loginHost: flags.loginHost } : {}),
              wellKnownPath: flags.wellKnownPath,
              image: flags.image,
            },
            io,
          ),
        );
      },
    );

  anchorFlags(
    doctor.command('anchors').description('per control-plane node: the expected anchor, whether it is bound and persistent, collisions'),
  ).action(async (flags: AnchorFlags) => {
    const options = await anchorOptions(flags);
    await run(flags, async (kube, io) => (await import('../bootstrap/anchors/commands.ts')).doctorAnchors(kube, options, io));
  });

  const anchors = bootstrap.command('anchors').description('anchor addresses on the external bridge of the control-plane nodes');
  anchorFlags(
    anchors
      .command('apply')
      .description('bind each control-plane node its anchor, idempotently and across reboots, with a one-shot Job per node'),
  )
    .option('--dry-run', 'print the Jobs it would create, change nothing')
    .action(async (flags: AnchorFlags) => {
      const options = await anchorOptions(flags);
      await run(flags, async (kube, io) => (await import('../bootstrap/anchors/commands.ts')).anchorsApply(kube, options, io));
    });

  const resolvers = bootstrap.command('resolvers').description("the platform hostnames in the per-project resolvers' hosts blocks");
  resolverCommand(
    resolvers,
    'apply',
    'map the platform hostnames to the internal VIPs in every project resolver, restart them, wait for the rollouts',
  );
  resolverCommand(resolvers, 'remove', 'take the platform hostnames out of every project resolver (fallthrough stays), restart them, wait');

  const config = bootstrap.command('config').description('the cluster configuration');
  configFlags(common(config.command('check').description('check the cluster configuration rules; one line per violation')))
    .option('--values <file>', 'chart values file to compare the switches and VIPs with (repeatable)', collect, [])
    .option('--northbound-listing <file>', 'output of `ovn-nbctl --columns=name,networks list logical_router_port`')
    .action(async (flags: CommonFlags & { values: string[]; northboundListing?: string }) => {
      await run(flags, async (kube, io) =>
        (await import('../bootstrap/config-check.ts')).configCheck(
          kube,
          {
            ...configOptions(flags),
            values: flags.values,
            ...(flags.northboundListing ? { northboundListing: flags.northboundListing } : {}),
          },
          io,
        ),
      );
    });
}
