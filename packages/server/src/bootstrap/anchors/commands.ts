import { stringify } from 'yaml';
import type { Scheduler } from '../../infra/scheduler.ts';
import { type ConfigOptions, loadClusterConfig, readOptionalFile } from '../inputs.ts';
import { type BootstrapKube, unreadable } from '../kube.ts';
import { readNetwork } from '../network.ts';
import { EXIT, type ExitCode, type Io, json, table } from '../output.ts';
import { nodeFacts } from '../topology/facts.ts';
import { evaluateAnchors, renderDoctor } from './doctor.ts';
import { anchorJob } from './job.ts';
import type { AnchorPlan } from './plan.ts';
import { runJobs } from './run.ts';
import { type Violation, validateAnchors } from './validate.ts';

export interface AnchorOptions extends ConfigOptions {
  json?: boolean;
  /** Namespace the Jobs run in. */
  namespace: string;
  image: string;
  /** Overrides EXT_NET_ANCHOR_INTERFACE. */
  interface?: string;
  /** `ovn-nbctl --columns=name,networks list logical_router_port` output, for router ports Kube-OVN has no resource for. */
  northboundListing?: string;
  bridgeTimeoutSeconds: number;
  timeoutSeconds: number;
  pollMs: number;
  keepJobs?: boolean;
  dryRun?: boolean;
  scheduler: Scheduler;
}

/** Reads the configuration and the cluster and runs every anchor rule (both commands start here). */
async function planAnchors(kube: BootstrapKube, options: AnchorOptions): Promise<AnchorPlan> {
  const loaded = await loadClusterConfig(options, kube);
  if (!loaded) throw new Error('unreachable: a required configuration is never undefined');
  const listing = await readOptionalFile(options.northboundListing, 'the northbound listing');
  const nodes = await kube.listNodes().catch((error: unknown) => {
    throw unreadable('nodes', error);
  });
  const services = await kube.listServices().catch((error: unknown) => {
    throw unreadable('services', error);
  });
  const network = await readNetwork(kube, {
    subnetName: loaded.config.externalSubnetName,
    ...(loaded.config.externalCidr ? { cidr: loaded.config.externalCidr } : {}),
    services,
    ...(listing !== undefined ? { northboundListing: listing } : {}),
  });
  const { violations, anchors } = validateAnchors({
    config: loaded.config,
    problems: loaded.problems,
    nodes: nodes.map(nodeFacts),
    network,
  });
  const iface = options.interface ?? loaded.config.anchorInterface;
  // It goes into a systemd unit line and `ip` commands: a Linux interface name and nothing else.
  if (!/^[A-Za-z0-9_.:-]{1,15}$/.test(iface))
    violations.unshift({
      rule: 'readable',
      subject: options.interface ? '--interface' : 'EXT_NET_ANCHOR_INTERFACE',
      message: `"${iface}" is not a network interface name`,
    });
  return { config: loaded.config, network, iface, anchors: violations.length === 0 ? anchors : [], violations };
}

export function renderViolations(violations: Violation[]): string {
  return `${table(
    ['RULE', 'SUBJECT', 'PROBLEM'],
    violations.map((v) => [v.rule, v.subject, v.message]),
  )}${violations.length} violation${violations.length === 1 ? '' : 's'}\n`;
}

function notes(io: Io, plan: AnchorPlan): void {
  for (const note of plan.network.notes) io.err(`note: ${note}\n`);
}

function jobsFor(plan: AnchorPlan, options: AnchorOptions, action: 'apply' | 'check') {
  return plan.anchors.map((anchor) => ({
    node: anchor.node,
    anchor,
    job: anchorJob({
      action,
      node: anchor.node,
      cidr: anchor.cidr,
      iface: plan.iface,
      namespace: options.namespace,
      image: options.image,
      bridgeTimeoutSeconds: options.bridgeTimeoutSeconds,
    }),
  }));
}

/** `tenantry bootstrap anchors apply`: 0 every node bound, 1 a node failed, 2 a rule is broken (nothing done). */
export async function anchorsApply(kube: BootstrapKube, options: AnchorOptions, io: Io): Promise<ExitCode> {
  const plan = await planAnchors(kube, options);
  notes(io, plan);
  if (plan.violations.length > 0) {
    io.out(options.json ? json({ violations: plan.violations }) : renderViolations(plan.violations));
    return EXIT.badInput;
  }
  const jobs = jobsFor(plan, options, 'apply');
  if (options.dryRun) {
    const rows = jobs.map(({ node, anchor, job }) => [node, anchor.cidr, plan.iface, `${job.metadata?.namespace}/${job.metadata?.name}`]);
    if (options.json)
      io.out(
        json({ dryRun: true, plan: jobs.map(({ node, anchor, job }) => ({ node, anchor: anchor.cidr, interface: plan.iface, job })) }),
      );
    else {
      io.out(table(['NODE', 'ANCHOR', 'INTERFACE', 'JOB'], rows));
      io.out(
        `\nDry run: nothing was changed. For each node, apply would create the Job below, wait for it (up to ${options.timeoutSeconds}s),\n` +
          `and delete it once it succeeded. A finished Job of the same name from an earlier run is replaced. The Job\n` +
          `writes /etc/tenantry/anchor-bind and /etc/systemd/system/tenantry-anchor.service (enabled), waits up to ${options.bridgeTimeoutSeconds}s for ${plan.iface}, and binds the anchor.\n\n`,
      );
      io.out(jobs.map(({ job }) => `---\n${stringify(job, { lineWidth: 0, aliasDuplicateObjects: false })}`).join(''));
    }
    return EXIT.ok;
  }
  const outcomes = await runJobs(
    kube,
    jobs.map(({ node, job }) => ({ node, job })),
    { scheduler: options.scheduler, timeoutMs: options.timeoutSeconds * 1000, pollMs: options.pollMs, keepJobs: options.keepJobs === true },
    (line) => io.progress(line),
    'anchors apply',
  );
  io.progressDone();
  const results = jobs.map(({ node, anchor }) => {
    const outcome = outcomes.get(node);
    if (!outcome?.ok) return { node, anchor: anchor.cidr, interface: plan.iface, ok: false, detail: outcome?.error ?? 'not run' };
    const address = outcome.values.get('address')?.[0];
    const unit = outcome.values.get('unit')?.[0];
    const detail = `${address === 'present' ? 'already bound' : 'bound'}; unit ${unit === 'unchanged' ? 'unchanged' : 'written'} and enabled`;
    return { node, anchor: anchor.cidr, interface: plan.iface, ok: true, detail };
  });
  const failed = results.filter((r) => !r.ok).length;
  if (options.json) io.out(json({ results, failed }));
  else {
    io.out(
      table(
        ['NODE', 'ANCHOR', 'INTERFACE', 'RESULT', 'DETAIL'],
        results.map((r) => [r.node, r.anchor, r.interface, r.ok ? 'ok' : 'failed', r.detail]),
      ),
    );
    io.out(
      failed > 0
        ? `${failed} of ${results.length} nodes failed; fix them and run apply again (it is idempotent)\n`
        : `all ${results.length} anchors bound; verify with: tenantry bootstrap doctor anchors\n`,
    );
  }
  return failed > 0 ? EXIT.findings : EXIT.ok;
}

/** `tenantry bootstrap doctor anchors`: 0 healthy, 1 drift, 2 a rule is broken. */
export async function doctorAnchors(kube: BootstrapKube, options: AnchorOptions, io: Io): Promise<ExitCode> {
  const plan = await planAnchors(kube, options);
  notes(io, plan);
  if (plan.violations.length > 0) {
    io.out(options.json ? json({ healthy: false, violations: plan.violations }) : renderViolations(plan.violations));
    return EXIT.badInput;
  }
  const jobs = jobsFor(plan, options, 'check');
  const outcomes = await runJobs(
    kube,
    jobs.map(({ node, job }) => ({ node, job })),
    { scheduler: options.scheduler, timeoutMs: options.timeoutSeconds * 1000, pollMs: options.pollMs, keepJobs: options.keepJobs === true },
    (line) => io.progress(line),
    'doctor anchors',
  );
  io.progressDone();
  const report = evaluateAnchors(plan, outcomes);
  io.out(options.json ? json(report) : renderDoctor(report));
  return report.healthy ? EXIT.ok : EXIT.findings;
}
