import { json, table } from '../output.ts';
import type { Classification } from './classify.ts';
import type { TopologyFacts } from './facts.ts';
import type { Signal } from './signals.ts';

interface ManualChecks {
  /** Decision aid 3: from a project pod, the identity provider's well-known path with a 6-second timeout. */
  manualTest: { commands: string[]; expect: string };
  /** Decision aid 4: on a control-plane node, is a public address on the external bridge and routed through it? */
  structuralCheck: { node: string; commands: string[]; expect: string };
}

export interface TopologyReport extends Classification {
  signals: Signal[];
  warnings: string[];
  manualChecks?: ManualChecks;
}

interface ManualCheckOptions {
  projectNamespace?: string;
  loginHost?: string;
  wellKnownPath: string;
  bridge: string;
  image: string;
}

/**
 * The exact commands of decision aids 3 and 4. The request goes to the login host's public address
 * (`--resolve`), so the test measures the hairpin path even when a project resolver already maps the
 * hostname to an internal VIP.
 */
export function manualChecks(facts: TopologyFacts, options: ManualCheckOptions): ManualChecks {
  const host = options.loginHost || '<login-host>';
  const namespace = options.projectNamespace || '<project-namespace>';
  const node = facts.nodes.find((n) => n.controlPlane)?.name ?? '<control-plane-node>';
  const url = `https://${host}${options.wellKnownPath.startsWith('/') ? '' : '/'}${options.wellKnownPath}`;
  return {
    manualTest: {
      commands: [
        `PUBLIC_IP=$(getent hosts ${host} | awk '{print $1; exit}')   # on your workstation: the public address`,
        `kubectl -n ${namespace} run tenantry-hairpin-check --rm -i --restart=Never --image=${options.image} --command -- \\`,
        `  curl -sk -o /dev/null -m 6 -w 'HTTP %{http_code} after %{time_total}s\\n' --resolve "${host}:443:$PUBLIC_IP" ${url}`,
      ],
      expect: 'any HTTP status well within 6 s: class B or C (not needed); a hang until the 6 s timeout: class A (needed)',
    },
    structuralCheck: {
      node,
      commands: [`ip -4 -br addr show ${options.bridge}`, `ip -4 route get "$PUBLIC_IP"`],
      expect: `a routable public address on ${options.bridge} and a route to the public address via ${options.bridge}: class B`,
    },
  };
}

export function renderTopologyJson(report: TopologyReport): string {
  return json({
    class: report.class,
    verdict: report.verdict,
    confidence: report.confidence,
    ...(report.leaning ? { leaning: report.leaning } : {}),
    reasons: report.reasons,
    signals: report.signals,
    warnings: report.warnings,
    ...(report.manualChecks ? report.manualChecks : {}),
  });
}

export function renderTopologyTable(report: TopologyReport): string {
  let out = table(
    ['SIGNAL', 'DETAIL', 'HINT', 'CONFIDENCE'],
    report.signals.map((s) => [s.signal, s.detail, s.hint ?? '-', s.confidence ?? '-']),
  );
  out += '\n';
  out += `Class:       ${report.class}${report.leaning ? ` (leaning ${report.leaning})` : ''}\n`;
  out += `Verdict:     ${report.verdict}\n`;
  out += `Confidence:  ${report.confidence}\n`;
  for (const reason of report.reasons) out += `Because:     ${reason}\n`;
  for (const warning of report.warnings) out += `Warning:     ${warning}\n`;
  const checks = report.manualChecks;
  if (checks) {
    out += '\nThe verdict needs confirming. Manual test (decision aid 3), from a pod in a project namespace:\n';
    for (const line of checks.manualTest.commands) out += `  ${line}\n`;
    out += `  Expect: ${checks.manualTest.expect}.\n`;
    out += `\nStructural check (decision aid 4), on control-plane node ${checks.structuralCheck.node}:\n`;
    for (const line of checks.structuralCheck.commands) out += `  ${line}\n`;
    out += `  Expect: ${checks.structuralCheck.expect}.\n`;
  }
  return out;
}
