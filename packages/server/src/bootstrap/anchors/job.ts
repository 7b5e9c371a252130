import { createHash } from 'node:crypto';
import type { V1Job } from '@kubernetes/client-node';

/**
 * The one-shot Jobs that bind and check anchors on a node. Each runs on its node
 * (`nodeName`), in the host network, as root with only NET_ADMIN, and writes what it found as `key=value`
 * lines in its termination message, which the CLI reads from the pod's status (no log access needed).
 *
 * Persistence is a systemd oneshot unit written into /etc/systemd/system through a hostPath and enabled the
 * way `systemctl enable` does it (a symlink in multi-user.target.wants), so the bind survives a reboot
 * without the Job needing the host's PID namespace.
 */
const UNIT_NAME = 'tenantry-anchor.service';
const HOST_UNIT_DIR = '/etc/systemd/system';
const HOST_SCRIPT_DIR = '/etc/tenantry';
const MOUNT_UNIT_DIR = '/host/etc/systemd/system';
const MOUNT_SCRIPT_DIR = '/host/etc/tenantry';

/** Runs on the host at boot (from the unit): waits for the bridge, then binds the address, idempotently. */
export const BIND_SCRIPT = `#!/bin/sh
# Written by \`tenantry bootstrap anchors apply\`: binds this node's anchor address on the external bridge.
set -eu
IFACE="$1"; ADDRESS="$2"; TIMEOUT="\${3:-300}"
i=0
until [ -e "/sys/class/net/$IFACE" ]; do
  i=$((i + 1)); [ "$i" -ge "$TIMEOUT" ] && { echo "timeout waiting for $IFACE" >&2; exit 1; }
  sleep 1
done
ip addr replace "$ADDRESS" dev "$IFACE"`;

export function renderUnit(iface: string, cidr: string, bridgeTimeoutSeconds: number): string {
  return `[Unit]
Description=Tenantry anchor address ${cidr} on ${iface}
Documentation=https://github.com/tenantry/tenantry/blob/main/docs/bootstrap.md
After=network-online.target openvswitch-switch.service
Wants=network-online.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=${HOST_SCRIPT_DIR}/anchor-bind ${iface} ${cidr} ${bridgeTimeoutSeconds}

[Install]
WantedBy=multi-user.target`;
}

/** The addresses on the bridge, one `address=<ip>/<prefix>` line each (iproute2 and busybox \`ip\` alike). */
const LIST_ADDRESSES = `ip -o addr show dev "$IFACE" | awk '{for (i = 1; i < NF; i++) if ($i == "inet" || $i == "inet6") print $(i + 1)}'`;

/**
 * In the Job: persist (bind script, unit, enable link; rewritten only when different), wait for the bridge,
 * then bind: an address already there is left alone, the same address with another prefix is replaced.
 */
const APPLY_SCRIPT = `set -eu
OUT="\${MESSAGE_FILE:-/dev/termination-log}"
: > "$OUT"
say() { printf '%s\\n' "$1" >> "$OUT"; }
put() {
  printf '%s\\n' "$3" > "$1.tenantry-new"
  if [ -f "$1" ] && cmp -s "$1.tenantry-new" "$1"; then rm -f "$1.tenantry-new"; echo unchanged; return 0; fi
  chmod "$2" "$1.tenantry-new"; mv "$1.tenantry-new" "$1"; echo written
}
mkdir -p "$SCRIPT_DIR" "$UNIT_DIR/multi-user.target.wants"
script=$(put "$SCRIPT_DIR/anchor-bind" 755 "$BIND_SCRIPT")
unit=$(put "$UNIT_DIR/${UNIT_NAME}" 644 "$UNIT")
ln -sfn "${HOST_UNIT_DIR}/${UNIT_NAME}" "$UNIT_DIR/multi-user.target.wants/${UNIT_NAME}"
say "script=$script"; say "unit=$unit"; say "enabled=yes"
i=0
until ip link show dev "$IFACE" >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -gt "$BRIDGE_TIMEOUT" ]; then say "error=bridge $IFACE did not appear within \${BRIDGE_TIMEOUT}s"; exit 1; fi
  [ "$i" -eq 1 ] && echo "waiting for $IFACE"
  sleep 1
done
state=added
for current in $(${LIST_ADDRESSES}); do
  if [ "$current" = "$ADDRESS" ]; then state=present
  elif [ "\${current%/*}" = "\${ADDRESS%/*}" ]; then ip addr del "$current" dev "$IFACE"; fi
done
if [ "$state" = added ]; then ip addr add "$ADDRESS" dev "$IFACE"; fi
say "address=$state"`;

/** In the Job: report the bridge's addresses and whether the unit is current and enabled; changes nothing. */
const CHECK_SCRIPT = `set -eu
OUT="\${MESSAGE_FILE:-/dev/termination-log}"
: > "$OUT"
say() { printf '%s\\n' "$1" >> "$OUT"; }
if ip link show dev "$IFACE" >/dev/null 2>&1; then
  say "bridge=present"
  for current in $(${LIST_ADDRESSES}); do say "bound=$current"; done
else
  say "bridge=absent"
fi
if [ ! -f "$UNIT_DIR/${UNIT_NAME}" ]; then say "unit=missing"
elif [ "$(cat "$UNIT_DIR/${UNIT_NAME}")" = "$UNIT" ]; then say "unit=current"
else say "unit=different"; fi
if [ -L "$UNIT_DIR/multi-user.target.wants/${UNIT_NAME}" ]; then say "enabled=yes"; else say "enabled=no"; fi`;

type AnchorAction = 'apply' | 'check';

/** A Job name of at most 63 characters (its pods carry it in a label), unique per node. */
export function jobName(action: AnchorAction, node: string): string {
  const base = `tenantry-anchor-${action}-`;
  const clean = node.replaceAll('.', '-');
  if (clean === node && base.length + node.length <= 63) return base + node;
  const hash = createHash('sha256').update(node).digest('hex').slice(0, 6);
  return `${base}${clean.slice(0, 63 - base.length - 7).replace(/-+$/, '')}-${hash}`;
}

interface AnchorJobSpec {
  action: AnchorAction;
  node: string;
  /** `ip/prefix`. */
  cidr: string;
  iface: string;
  namespace: string;
  image: string;
  bridgeTimeoutSeconds: number;
}

export function anchorJob(spec: AnchorJobSpec): V1Job {
  const apply = spec.action === 'apply';
  const labels = {
    'app.kubernetes.io/name': 'tenantry-anchor',
    'app.kubernetes.io/managed-by': 'tenantry',
    'tenantry.io/anchor-action': spec.action,
  };
  const annotations = { 'tenantry.io/anchor-node': spec.node, 'tenantry.io/anchor': spec.cidr, 'tenantry.io/anchor-interface': spec.iface };
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: jobName(spec.action, spec.node), namespace: spec.namespace, labels, annotations },
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: spec.bridgeTimeoutSeconds + 240,
      ttlSecondsAfterFinished: 3600,
      template: {
        metadata: { labels, annotations },
        spec: {
          nodeName: spec.node,
          hostNetwork: true,
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          priorityClassName: 'system-node-critical',
          tolerations: [{ operator: 'Exists' }],
          containers: [
            {
              name: 'anchor',
              image: spec.image,
              command: ['sh', '-c', apply ? APPLY_SCRIPT : CHECK_SCRIPT],
              env: [
                { name: 'IFACE', value: spec.iface },
                { name: 'ADDRESS', value: spec.cidr },
                { name: 'BRIDGE_TIMEOUT', value: String(spec.bridgeTimeoutSeconds) },
                { name: 'UNIT_DIR', value: MOUNT_UNIT_DIR },
                { name: 'SCRIPT_DIR', value: MOUNT_SCRIPT_DIR },
                { name: 'UNIT', value: renderUnit(spec.iface, spec.cidr, spec.bridgeTimeoutSeconds) },
                ...(apply ? [{ name: 'BIND_SCRIPT', value: BIND_SCRIPT }] : []),
              ],
              securityContext: {
                runAsUser: 0,
                runAsNonRoot: false,
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'], ...(apply ? { add: ['NET_ADMIN'] } : {}) },
              },
              resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '64Mi' } },
              terminationMessagePolicy: 'FallbackToLogsOnError',
              volumeMounts: [
                { name: 'systemd-units', mountPath: MOUNT_UNIT_DIR, readOnly: !apply },
                ...(apply ? [{ name: 'tenantry-scripts', mountPath: MOUNT_SCRIPT_DIR }] : []),
              ],
            },
          ],
          volumes: [
            { name: 'systemd-units', hostPath: { path: HOST_UNIT_DIR, type: 'Directory' } },
            ...(apply ? [{ name: 'tenantry-scripts', hostPath: { path: HOST_SCRIPT_DIR, type: 'DirectoryOrCreate' } }] : []),
          ],
        },
      },
    },
  };
}

/** `key=value` lines of a termination message; repeated keys collect in order. */
export function parseMessage(message: string): Map<string, string[]> {
  const values = new Map<string, string[]>();
  for (const line of message.split('\n')) {
    const at = line.indexOf('=');
    if (at <= 0) continue;
    const key = line.slice(0, at).trim();
    values.set(key, [...(values.get(key) ?? []), line.slice(at + 1).trim()]);
  }
  return values;
}
