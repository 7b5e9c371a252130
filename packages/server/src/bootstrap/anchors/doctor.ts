import { KEYS } from '../cluster-config.ts';
import { type Address, parseCidr, sameAddress } from '../ip.ts';
import { table } from '../output.ts';
import type { AnchorPlan } from './plan.ts';
import type { JobOutcome } from './run.ts';

interface NodeAnchorState {
  node: string;
  anchor: string;
  interface: string;
  bridge: 'present' | 'absent' | 'unknown';
  /** `wrong-prefix`: the address is there with another prefix length. */
  bound: 'yes' | 'no' | 'wrong-prefix' | 'unknown';
  /** `different`: a unit is installed but binds something else (an older anchor). */
  unit: 'current' | 'different' | 'missing' | 'unknown';
  enabled: 'yes' | 'no' | 'unknown';
  collisions: string[];
  status: 'ok' | 'drift';
  problems: string[];
}

interface AnchorsReport {
  healthy: boolean;
  nodes: NodeAnchorState[];
}

/** Turns each node's check into its state, and looks across nodes for addresses bound where they must not be. */
export function evaluateAnchors(plan: AnchorPlan, outcomes: Map<string, JobOutcome>): AnchorsReport {
  const bound = new Map<string, Address[]>();
  for (const anchor of plan.anchors) {
    const outcome = outcomes.get(anchor.node);
    const list = outcome?.ok ? (outcome.values.get('bound') ?? []) : [];
    bound.set(
      anchor.node,
      list.flatMap((text) => parseCidr(text)?.address ?? []),
    );
  }
  const owners: Array<{ address: Address; owner: string }> = [
    ...plan.network.routerPorts,
    ...plan.network.systemSnat,
    ...plan.network.projectAddresses,
    ...(plan.config.kubeApi.vip ? [{ address: plan.config.kubeApi.vip, owner: KEYS.kubeApiVip }] : []),
    ...(plan.config.edgeGateway.vip ? [{ address: plan.config.edgeGateway.vip, owner: KEYS.edgeGatewayVip }] : []),
  ];
  const nodes = plan.anchors.map((anchor): NodeAnchorState => {
    const outcome = outcomes.get(anchor.node);
    const base = { node: anchor.node, anchor: anchor.cidr, interface: plan.iface, collisions: [] as string[], problems: [] as string[] };
    if (!outcome?.ok)
      return {
        ...base,
        bridge: 'unknown',
        bound: 'unknown',
        unit: 'unknown',
        enabled: 'unknown',
        status: 'drift',
        problems: [`the check did not run: ${outcome?.error ?? 'no result'}`],
      };
    const values = outcome.values;
    const bridge = values.get('bridge')?.[0] === 'present' ? 'present' : 'absent';
    const here = values.get('bound') ?? [];
    const isBound = here.includes(anchor.cidr)
      ? 'yes'
      : here.some((text) => {
            const cidr = parseCidr(text);
            return cidr !== undefined && sameAddress(cidr.address, anchor.address);
          })
        ? 'wrong-prefix'
        : 'no';
    const unitValue = values.get('unit')?.[0];
    const unit = unitValue === 'current' || unitValue === 'different' || unitValue === 'missing' ? unitValue : 'unknown';
    const enabled = values.get('enabled')?.[0] === 'yes' ? 'yes' : 'no';
    const collisions: string[] = [];
    for (const address of bound.get(anchor.node) ?? []) {
      if (sameAddress(address, anchor.address)) continue;
      const other = plan.anchors.find((a) => sameAddress(a.address, address));
      if (other) collisions.push(`${address} (the anchor of ${other.node}) is bound here too`);
      for (const owner of owners) if (sameAddress(owner.address, address)) collisions.push(`${address} bound here is ${owner.owner}`);
    }
    for (const [node, addresses] of bound)
      if (node !== anchor.node && addresses.some((a) => sameAddress(a, anchor.address))) collisions.push(`also bound on ${node}`);
    const problems: string[] = [];
    if (bridge === 'absent') problems.push(`${plan.iface} does not exist on the node`);
    if (isBound === 'no') problems.push('the anchor is not bound');
    if (isBound === 'wrong-prefix') problems.push(`the address is bound, but not as ${anchor.cidr}`);
    if (unit === 'missing') problems.push('no unit: the bind does not survive a reboot');
    if (unit === 'different') problems.push('the unit binds something else (an older anchor?)');
    if (enabled === 'no') problems.push('the unit is not enabled: the bind does not survive a reboot');
    const healthy = problems.length === 0 && collisions.length === 0;
    return { ...base, bridge, bound: isBound, unit, enabled, collisions, status: healthy ? 'ok' : 'drift', problems };
  });
  return { healthy: nodes.every((n) => n.status === 'ok'), nodes };
}

export function renderDoctor(report: AnchorsReport): string {
  let out = table(
    ['NODE', 'ANCHOR', 'INTERFACE', 'BOUND', 'UNIT', 'ENABLED', 'COLLISIONS', 'STATUS'],
    report.nodes.map((n) => [n.node, n.anchor, n.interface, n.bound, n.unit, n.enabled, n.collisions.join('; ') || '-', n.status]),
  );
  for (const node of report.nodes) for (const problem of [...node.problems, ...node.collisions]) out += `${node.node}: ${problem}\n`;
  const drift = report.nodes.filter((n) => n.status !== 'ok').map((n) => n.node);
  out += report.healthy
    ? `healthy: all ${report.nodes.length} anchors bound and persistent\n`
    : `drift on ${drift.join(', ')}: run tenantry bootstrap anchors apply (collisions need a new address in ${KEYS.anchors} first)\n`;
  return out;
}
