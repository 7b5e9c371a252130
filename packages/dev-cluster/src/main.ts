import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
// The doubles live beside the server's suites, which are their first users; this package runs them as one cluster.
import { DRIVER_NAMESPACE, DRIVER_USER, KUBE_DC_NAMESPACE, PLAN_WRITER, startKubeDcCluster } from '../../server/test/kube-dc-cluster.ts';

const USAGE = `usage: tenantry-dev-cluster --dir DIR [--address-pool CIDR,...] [--allow-public-projects]

Starts a local Kube-DC on loopback (the Kubernetes API with Kube-DC's CRDs, admission policies and
controller, and its Keycloak) and writes into DIR:
  kubeconfig     contexts "tenantry" (the driver's service account, with the chart's RBAC; current) and "admin"
  tenantry.env   what \`tenantry serve\` needs for TENANTRY_PLATFORM=kubernetes against it
  test.env       what the driver's live suite needs (TENANTRY_TEST_KUBECONFIG and friends)
Stops on SIGTERM or SIGINT.`;

const { values } = parseArgs({
  options: {
    dir: { type: 'string' },
    'address-pool': { type: 'string', default: '10.100.0.0/16' },
    'allow-public-projects': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});
if (values.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
if (!values.dir) {
  process.stderr.write(`tenantry-dev-cluster: --dir is required\n${USAGE}\n`);
  process.exit(2);
}
const dir = resolve(values.dir);
mkdirSync(dir, { recursive: true, mode: 0o700 });

// Kube-DC's controllers take a moment to act, as on a real cluster: a client sees the in-between states.
const cluster = await startKubeDcCluster({ running: true, allowPublicProjects: values['allow-public-projects'], reconcileDelayMs: 300 });
const { kube, keycloak } = cluster;
// Kube-DC's chart installs the console's OS image catalogue in its own namespace.
kube.create({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'images-configmap', namespace: KUBE_DC_NAMESPACE },
  data: { 'images.yaml': readFileSync(new URL('../../server/src/images/default-images.yaml', import.meta.url), 'utf8') },
});

const kubeconfig = join(dir, 'kubeconfig');
await kube.writeKubeconfigContexts(kubeconfig, [
  { name: 'tenantry', user: DRIVER_USER, namespace: DRIVER_NAMESPACE },
  { name: 'admin', user: 'admin' },
]);
const secretFile = join(dir, 'idp-client-secret');
writeFileSync(secretFile, `${keycloak.credentials.clientSecret}\n`, { mode: 0o600 });
const env = (entries: Record<string, string>) =>
  `${Object.entries(entries)
    .map(([name, value]) => `${name}=${value}`)
    .join('\n')}\n`;
const serve = {
  TENANTRY_PLATFORM: 'kubernetes',
  TENANTRY_KUBECONFIG: kubeconfig,
  TENANTRY_KUBERNETES_NAMESPACE: DRIVER_NAMESPACE,
  TENANTRY_IDP_URL: keycloak.url,
  TENANTRY_IDP_ADMIN_REALM: keycloak.credentials.adminRealm,
  TENANTRY_IDP_CLIENT_ID: keycloak.credentials.clientId,
  TENANTRY_IDP_CLIENT_SECRET_FILE: secretFile,
  TENANTRY_ADDRESS_POOL: values['address-pool'] ?? '10.100.0.0/16',
  TENANTRY_KUBE_DC_NAMESPACE: KUBE_DC_NAMESPACE,
  TENANTRY_KUBE_DC_SERVICE_ACCOUNT: PLAN_WRITER,
};
writeFileSync(join(dir, 'tenantry.env'), env(serve), { mode: 0o600 });
writeFileSync(
  join(dir, 'test.env'),
  env({
    TENANTRY_TEST_KUBECONFIG: kubeconfig,
    TENANTRY_TEST_NAMESPACE: DRIVER_NAMESPACE,
    TENANTRY_TEST_IDP_URL: keycloak.url,
    TENANTRY_TEST_IDP_ADMIN_REALM: keycloak.credentials.adminRealm,
    TENANTRY_TEST_IDP_CLIENT_ID: keycloak.credentials.clientId,
    TENANTRY_TEST_IDP_CLIENT_SECRET: keycloak.credentials.clientSecret,
    TENANTRY_TEST_ADDRESS_POOL: values['address-pool'] ?? '10.100.0.0/16',
    TENANTRY_TEST_KUBE_DC_SERVICE_ACCOUNT: PLAN_WRITER,
  }),
  { mode: 0o600 },
);

process.stdout.write(
  `tenantry-dev-cluster ready: Kubernetes API ${kube.url}, Keycloak ${keycloak.url}\n` +
    `  kubectl --kubeconfig ${kubeconfig} get organizations -A\n` +
    `  set -a; . ${join(dir, 'tenantry.env')}; set +a; npm start\n`,
);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await cluster.close();
  process.exit(0);
};
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
