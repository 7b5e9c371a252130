import { type ConfigOptions, loadClusterConfig, loadValues, splitRef } from '../inputs.ts';
import type { BootstrapKube } from '../kube.ts';
import { BootstrapError, EXIT, type ExitCode, type Io } from '../output.ts';
import { classifyTopology } from './classify.ts';
import { gatherTopologyFacts } from './facts.ts';
import { manualChecks, renderTopologyJson, renderTopologyTable, type TopologyReport } from './report.ts';
import { topologySignals } from './signals.ts';

export interface TopologyOptions extends ConfigOptions {
  json?: boolean;
  values: string[];
  gatewayNamespace?: string;
  gatewayService?: string;
  projectNamespace?: string;
  loginHost?: string;
  wellKnownPath: string;
  image: string;
}

/**
 * `tenantry bootstrap doctor topology`: the evidence, the class, the verdict and the confidence. Every verdict
 * exits 0; only a cluster that cannot be read (3) or bad flags (2) do not.
 */
export async function doctorTopology(kube: BootstrapKube, options: TopologyOptions, io: Io): Promise<ExitCode> {
  const values = await loadValues(options.values);
  // The cluster configuration is optional here (it only adds the address-layer cross-check) unless one was named.
  const named = options.config !== undefined || options.configmap !== undefined;
  const notes: string[] = [];
  let loaded: Awaited<ReturnType<typeof loadClusterConfig>>;
  try {
    loaded = await loadClusterConfig(options, kube, { optional: !named });
  } catch (error) {
    if (named || !(error instanceof BootstrapError)) throw error;
    notes.push(`the cluster configuration was not read (${error.message}): the address-layer row is empty`);
  }
  const facts = await gatherTopologyFacts(kube, {
    gatewayNamespace: options.gatewayNamespace ?? values.edgeGateway.namespace,
    ...(options.gatewayService ? { gatewayService: splitRef(options.gatewayService, '--gateway-service') } : {}),
    ...(loaded?.config.addressLayer ? { addressLayer: loaded.config.addressLayer } : {}),
    layer2Class: values.edgeGateway.loadBalancerClass,
  });
  const { signals, warnings } = topologySignals(facts);
  warnings.push(...notes);
  for (const problem of loaded?.problems ?? []) warnings.push(`${loaded?.config.source}: ${problem.field}: ${problem.message}`);
  const classification = classifyTopology(signals);
  const report: TopologyReport = { ...classification, signals, warnings };
  if (classification.confidence !== 'high' || classification.verdict === 'ambiguous')
    report.manualChecks = manualChecks(facts, {
      ...(options.projectNamespace ? { projectNamespace: options.projectNamespace } : {}),
      loginHost: options.loginHost || values.hostnames.login,
      wellKnownPath: options.wellKnownPath,
      bridge: loaded?.config.anchorInterface ?? values.edgeGateway.interface,
      image: options.image,
    });
  io.out(options.json ? renderTopologyJson(report) : renderTopologyTable(report));
  return EXIT.ok;
}
