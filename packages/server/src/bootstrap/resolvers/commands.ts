import { createHash } from 'node:crypto';
import type { V1ConfigMap, V1Deployment } from '@kubernetes/client-node';
import { createTwoFilesPatch } from 'diff';
import type { Scheduler } from '../../infra/scheduler.ts';
import { type ConfigOptions, loadClusterConfig, loadValues, splitRef } from '../inputs.ts';
import { type BootstrapKube, describe, statusOf, unreadable } from '../kube.ts';
import { EXIT, type ExitCode, type Io, json, table } from '../output.ts';
import { CorefileError, editCorefile, type HostsEntry } from './corefile.ts';
import { planHosts } from './hosts.ts';
import { waitForRollouts } from './rollouts.ts';

const COREFILE_KEY = 'Corefile';
/** Set on each resolver's pod template to the hash of the configuration it runs; changing it rolls the pods. */
export const CONFIG_ANNOTATION = 'tenantry.io/resolver-config';

export interface ResolverOptions extends ConfigOptions {
  json?: boolean;
  values: string[];
  selector: string;
  namespace?: string;
  corefileConfigMaps: string[];
  ttl: number;
  timeoutSeconds: number;
  pollMs: number;
  dryRun?: boolean;
  scheduler: Scheduler;
}

interface ConfigMapState {
  ref: string;
  /** The Corefile after the edit (what the resolvers will run). */
  corefile?: string;
  outcome: 'updated' | 'unchanged' | 'would change' | 'failed';
  detail: string;
  diff?: string;
  leftovers: HostsEntry[];
}

/** Runs `work` over the items, a few at a time: many resolvers, without flooding the API server. */
async function inParallel<T>(items: T[], work: (item: T) => Promise<void>, limit = 8): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

function mounted(deployment: V1Deployment): string[] {
  const namespace = deployment.metadata?.namespace ?? '';
  const names = new Set<string>();
  for (const volume of deployment.spec?.template?.spec?.volumes ?? []) {
    if (volume.configMap?.name) names.add(volume.configMap.name);
    for (const source of volume.projected?.sources ?? []) if (source.configMap?.name) names.add(source.configMap.name);
  }
  return [...names].sort().map((name) => `${namespace}/${name}`);
}

async function editConfigMap(
  kube: BootstrapKube,
  ref: string,
  edit: Parameters<typeof editCorefile>[1],
  dryRun: boolean,
): Promise<ConfigMapState | undefined> {
  const { namespace, name } = splitRef(ref, 'ConfigMap');
  for (let attempt = 1; ; attempt++) {
    let configMap: V1ConfigMap | undefined;
    try {
      configMap = await kube.getConfigMap(namespace, name);
    } catch (error) {
      throw unreadable(`the ConfigMap ${ref}`, error);
    }
    const corefile = configMap?.data?.[COREFILE_KEY];
    if (!configMap || corefile === undefined) return undefined;
    let result: ReturnType<typeof editCorefile>;
    try {
      result = editCorefile(corefile, edit);
    } catch (error) {
      if (!(error instanceof CorefileError)) throw error;
      return { ref, outcome: 'failed', detail: `cannot edit its Corefile: ${error.message}`, leftovers: [] };
    }
    const base = { ref, corefile: result.text, leftovers: result.leftovers };
    if (!result.changed) return { ...base, outcome: 'unchanged', detail: 'already as wanted' };
    const diff = createTwoFilesPatch(`${ref} (now)`, `${ref} (after)`, `${corefile}\n`, `${result.text}\n`, undefined, undefined, {
      context: 2,
    })
      .split('\n')
      .slice(1)
      .join('\n');
    if (dryRun) return { ...base, outcome: 'would change', detail: `${result.blocks} server block${result.blocks === 1 ? '' : 's'}`, diff };
    try {
      await kube.replaceConfigMap({ ...configMap, data: { ...configMap.data, [COREFILE_KEY]: result.text } });
      return { ...base, outcome: 'updated', detail: `${result.blocks} server block${result.blocks === 1 ? '' : 's'}`, diff };
    } catch (error) {
      // Someone wrote in between: read it again and redo the edit on what they wrote.
      if (statusOf(error) === 409 && attempt < 3) continue;
      return { ref, outcome: 'failed', detail: `cannot write it: ${describe(error)}`, leftovers: [] };
    }
  }
}

/** `tenantry bootstrap resolvers apply|remove`: 0 every resolver runs the new configuration, 1 one did not, 2 bad input. */
export async function resolvers(kube: BootstrapKube, mode: 'apply' | 'remove', options: ResolverOptions, io: Io): Promise<ExitCode> {
  const values = await loadValues(options.values);
  const loaded = await loadClusterConfig(options, kube);
  if (!loaded) throw new Error('unreachable: a required configuration is never undefined');
  const plan = planHosts(loaded.config, values, mode);
  // Apply needs the switches and VIPs; remove only takes names out (the VIPs just name leftovers).
  const vipProblems = mode === 'apply' ? loaded.problems.filter((p) => p.field.endsWith('_VIP') || p.field.endsWith('_ENABLED')) : [];
  const problems = [...vipProblems, ...plan.problems];
  if (problems.length > 0) {
    io.out(
      options.json
        ? json({ problems })
        : `${table(
            ['FIELD', 'PROBLEM'],
            problems.map((p) => [p.field, p.message]),
          )}`,
    );
    return EXIT.badInput;
  }
  for (const note of plan.notes) io.err(`note: ${note}\n`);
  let deployments: V1Deployment[];
  try {
    deployments = await kube.listDeployments(options.namespace, options.selector);
  } catch (error) {
    throw unreadable(`resolver deployments (${options.selector})`, error);
  }
  deployments.sort((a, b) => `${a.metadata?.namespace}/${a.metadata?.name}`.localeCompare(`${b.metadata?.namespace}/${b.metadata?.name}`));
  const edit = { entries: plan.entries, remove: plan.platformNames, ...(mode === 'apply' ? { ttl: options.ttl } : {}), vips: plan.vips };
  const refs = [...new Set([...options.corefileConfigMaps, ...deployments.flatMap(mounted)])].sort();
  const states = new Map<string, ConfigMapState>();
  await inParallel(refs, async (ref) => {
    const state = await editConfigMap(kube, ref, edit, options.dryRun === true);
    if (state) states.set(ref, state);
  });
  // Edited side by side: listed in the order of `refs`, whatever order they finished in.
  const edited = refs.flatMap((ref) => states.get(ref) ?? []);
  if (states.size === 0 && deployments.length === 0) {
    io.err(
      `note: no resolver Deployment matches ${options.selector}${options.namespace ? ` in ${options.namespace}` : ''}, and no Corefile ConfigMap was found: nothing to do\n`,
    );
    io.out(options.json ? json({ entries: plan.entries, configMaps: [], resolvers: [] }) : 'no per-project resolver found\n');
    return EXIT.ok;
  }

  const rows = deployments.map((d) => {
    const key = `${d.metadata?.namespace}/${d.metadata?.name}`;
    const own = mounted(d).filter((ref) => states.has(ref));
    const failed = own.filter((ref) => states.get(ref)?.outcome === 'failed');
    const hash = createHash('sha256')
      .update(own.map((ref) => `${ref}\n${states.get(ref)?.corefile ?? ''}`).join('\n'))
      .digest('hex')
      .slice(0, 16);
    const running = d.spec?.template?.metadata?.annotations?.[CONFIG_ANNOTATION];
    let restart: 'restart' | 'not needed' | 'skipped' = running === hash ? 'not needed' : 'restart';
    let problem: string | undefined;
    if (own.length === 0) {
      restart = 'skipped';
      problem = `mounts no ConfigMap with a ${COREFILE_KEY} key`;
    } else if (failed.length > 0) {
      restart = 'skipped';
      problem = `its configuration ${failed.join(', ')} was not written`;
    }
    return { key, deployment: d, configMaps: own, hash, restart, problem };
  });

  if (options.dryRun) {
    if (options.json)
      io.out(
        json({
          dryRun: true,
          entries: plan.entries,
          configMaps: edited.map(({ corefile: _c, ...rest }) => rest),
          resolvers: rows.map((r) => ({
            resolver: r.key,
            configMaps: r.configMaps,
            restart: r.restart,
            ...(r.problem ? { problem: r.problem } : {}),
          })),
        }),
      );
    else {
      io.out(renderEntries(plan.entries, mode));
      for (const state of edited) io.out(`\n${state.ref}: ${state.outcome} (${state.detail})\n${state.diff ?? ''}`);
      io.out(
        `\n${table(
          ['RESOLVER', 'CONFIGMAPS', 'WOULD RESTART'],
          rows.map((r) => [
            r.key,
            r.configMaps.join(', ') || '-',
            r.problem ?? (r.restart === 'restart' ? 'yes' : 'no, already running it'),
          ]),
        )}`,
      );
      io.out('Dry run: nothing was changed.\n');
    }
    return EXIT.ok;
  }

  const restarts = rows.filter((r) => r.restart === 'restart');
  const restartErrors = new Map<string, string>();
  await inParallel(restarts, async (row) => {
    try {
      await kube.patchTemplateAnnotations(row.deployment.metadata?.namespace ?? '', row.deployment.metadata?.name ?? '', {
        [CONFIG_ANNOTATION]: row.hash,
      });
    } catch (error) {
      restartErrors.set(row.key, `cannot restart it: ${describe(error)}`);
    }
  });
  const rollouts = await waitForRollouts(
    restarts.filter((r) => !restartErrors.has(r.key)).map((r) => r.key),
    () => kube.listDeployments(options.namespace, options.selector),
    { scheduler: options.scheduler, timeoutMs: options.timeoutSeconds * 1000, pollMs: options.pollMs },
    (line) => io.progress(line),
  );
  io.progressDone();
  const results = rows.map((r) => {
    const rollout =
      restartErrors.get(r.key) ?? r.problem ?? (r.restart === 'restart' ? (rollouts.get(r.key) ?? 'not waited for') : 'not needed');
    return {
      resolver: r.key,
      configMaps: r.configMaps.map((ref) => `${ref} (${states.get(ref)?.outcome})`),
      restarted: r.restart === 'restart' && !restartErrors.has(r.key),
      rollout,
      ok: rollout === 'done' || rollout === 'not needed',
    };
  });
  const failedConfigMaps = edited.filter((s) => s.outcome === 'failed');
  const failures = results.filter((r) => !r.ok).length + failedConfigMaps.length;
  const leftovers = edited.flatMap((s) => s.leftovers.map((l) => ({ configMap: s.ref, ...l })));
  if (options.json)
    io.out(
      json({
        entries: plan.entries,
        configMaps: edited.map(({ corefile: _c, diff: _d, ...rest }) => rest),
        resolvers: results,
        failed: failures,
        ...(mode === 'remove' ? { waitMinutes: 5 } : {}),
      }),
    );
  else {
    io.out(renderEntries(plan.entries, mode));
    for (const state of failedConfigMaps) io.out(`${state.ref}: ${state.detail}\n`);
    io.out(
      table(
        ['RESOLVER', 'CONFIGMAPS', 'RESTARTED', 'ROLLOUT'],
        results.map((r) => [r.resolver, r.configMaps.join(', ') || '-', r.restarted ? 'yes' : 'no', r.rollout]),
      ),
    );
    for (const l of leftovers)
      io.out(
        `warning: ${l.configMap} still maps ${l.names.join(' ')} to ${l.address} (not a platform hostname in the values): remove it by hand if it should go\n`,
      );
    io.out(
      failures > 0
        ? `${failures} failed; fix them and run the command again (it is idempotent)\n`
        : `all ${results.length} resolvers run the new configuration\n`,
    );
    if (mode === 'remove')
      io.out(
        'Wait at least 5 minutes before verifying (clients and caches keep old answers), then check from a project pod that the names resolve to their public addresses.\n',
      );
  }
  return failures > 0 ? EXIT.findings : EXIT.ok;
}

function renderEntries(entries: HostsEntry[], mode: 'apply' | 'remove'): string {
  if (mode === 'remove') return 'Taking the platform hostnames out of the hosts blocks (fallthrough stays).\n';
  return `Hosts entries:\n${entries.map((e) => `  ${e.address} ${e.names.join(' ')}\n`).join('')}`;
}
