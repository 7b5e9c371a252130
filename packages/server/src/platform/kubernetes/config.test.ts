import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ConfigError, loadConfig } from '../../config/config.ts';
import { platformDrivers } from '../drivers.ts';
import { KubernetesConfigErrors, type KubernetesPlatformConfig, loadKubernetesConfig } from './config.ts';

const dir = mkdtempSync(join(tmpdir(), 'tenantry-k8s-config-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const kubeconfig = join(dir, 'kubeconfig');
writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\n');
const secret = join(dir, 'secret');
writeFileSync(secret, 's3cret\n');
const valid = {
  TENANTRY_KUBECONFIG: kubeconfig,
  TENANTRY_IDP_URL: 'https://login.example.com/',
  TENANTRY_IDP_CLIENT_SECRET_FILE: secret,
  TENANTRY_ADDRESS_POOL: '10.100.0.0/16, 10.101.5.7/24',
  TENANTRY_GPU_PROFILES: 'nvidia-a10=nvidia.com/GA102GL_A10',
};
const reader = (env: Record<string, string>) => (name: string) => env[name];

test('valid settings: defaults filled in, the secret read from its file, pools normalized', () => {
  const config = loadKubernetesConfig(reader(valid));
  assert.equal(config.identity.url, 'https://login.example.com');
  assert.equal(config.identity.clientSecret, 's3cret');
  assert.deepEqual(
    [config.identity.adminRealm, config.identity.clientId, config.identity.login, config.kubeDcNamespace, config.kubeDcServiceAccount],
    ['master', 'tenantry', 'console', 'kube-dc', undefined],
  );
  assert.deepEqual(config.addressPool, ['10.100.0.0/16', '10.101.5.0/24']);
  assert.deepEqual([config.projectPrefixLength, config.egressNetworkType, config.namespace], [24, 'cloud', 'tenantry']);
  assert.deepEqual(config.gpuProfiles, { 'nvidia-a10': 'nvidia.com/GA102GL_A10' });
  assert.equal(config.metricsUrl, undefined);
});

test('every problem is reported at once, one line each naming its setting', () => {
  const env = {
    TENANTRY_KUBECONFIG: join(dir, 'missing'),
    TENANTRY_IDP_URL: 'login.example.com',
    TENANTRY_ADDRESS_POOL: '10.0.0.0/16,fd00::/64,10.1.0.0/30',
    TENANTRY_IDP_LOGIN: 'action-token',
    TENANTRY_EGRESS_NETWORK_TYPE: 'private',
    TENANTRY_GPU_PROFILES: 'a10',
  };
  assert.throws(
    () => loadKubernetesConfig(reader(env)),
    (error: unknown) => {
      assert.ok(error instanceof KubernetesConfigErrors);
      assert.deepEqual(
        error.problems.map((p) => p.variable),
        [
          'TENANTRY_KUBECONFIG',
          'TENANTRY_IDP_URL',
          'TENANTRY_IDP_CLIENT_SECRET_FILE',
          'TENANTRY_IDP_LOGIN_REDIRECT_URL',
          'TENANTRY_ADDRESS_POOL',
          'TENANTRY_ADDRESS_POOL',
          'TENANTRY_EGRESS_NETWORK_TYPE',
          'TENANTRY_GPU_PROFILES',
        ],
      );
      assert.equal(error.message.split('\n').length, 8);
      return true;
    },
  );
});

test('TENANTRY_PLATFORM=kubernetes: invalid settings stop start-up listing each; valid ones give serve the driver settings', () => {
  assert.throws(
    () => loadConfig(platformDrivers, { TENANTRY_PLATFORM: 'kubernetes', TENANTRY_KUBECONFIG: kubeconfig }),
    (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.deepEqual(
        error.message.split('\n').map((line) => line.split(':')[0]),
        ['TENANTRY_IDP_URL', 'TENANTRY_IDP_CLIENT_SECRET_FILE', 'TENANTRY_ADDRESS_POOL'],
      );
      return true;
    },
  );
  const config = loadConfig(platformDrivers, { TENANTRY_PLATFORM: 'kubernetes', ...valid });
  assert.equal(config.platform, 'kubernetes');
  assert.equal((config.platformSettings as KubernetesPlatformConfig).identity.url, 'https://login.example.com');
  assert.equal((config.platformSettings as KubernetesPlatformConfig).identity.login, 'console');
});
