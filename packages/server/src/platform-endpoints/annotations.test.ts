import assert from 'node:assert/strict';
import { test } from 'node:test';
import { matchesNodeSelector, parseSettings, SettingsError } from './annotations.ts';

test('settings: the seed defaults when only the backend source is set', () => {
  const settings = parseSettings({ 'tenantry.io/backend-source': 'node-control-plane' });
  assert.deepEqual(settings.nodeSelector, [{ key: 'node-role.kubernetes.io/control-plane', value: '' }]);
  assert.equal(settings.addressType, 'InternalIP');
  assert.deepEqual(
    { ...settings.health },
    {
      scheme: 'https',
      path: '/readyz',
      port: 443,
      host: undefined,
      intervalMs: 5000,
      timeoutMs: 2000,
      failureThreshold: 2,
      successThreshold: 1,
      insecureSkipVerify: true,
      statusMax: 499,
    },
  );
});

test('settings: each bad annotation is named', () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ 'tenantry.io/health-port': '70000' }, /health-port must be between 1 and 65535/],
    [{ 'tenantry.io/health-scheme': 'tcp' }, /health-scheme must be https or http/],
    [{ 'tenantry.io/health-timeout-seconds': '9' }, /health-timeout-seconds \(9\) must not exceed/],
    [{ 'tenantry.io/health-insecure-skip-verify': 'yes' }, /insecure-skip-verify must be true or false/],
    [{ 'tenantry.io/health-host': 'bad host' }, /health-host must be a hostname/],
    [{ 'tenantry.io/backend-node-selector': 'a=b=c' }, /cannot read "a=b=c"/],
  ];
  for (const [annotations, message] of cases)
    assert.throws(
      () => parseSettings(annotations),
      (e: Error) => e instanceof SettingsError && message.test(e.message),
    );
});

test('node selector: an empty value means the label exists (kubeadm "" and RKE2 "true" alike)', () => {
  const selector = [{ key: 'node-role.kubernetes.io/control-plane', value: '' }];
  assert.ok(matchesNodeSelector({ 'node-role.kubernetes.io/control-plane': '' }, selector));
  assert.ok(matchesNodeSelector({ 'node-role.kubernetes.io/control-plane': 'true' }, selector));
  assert.ok(!matchesNodeSelector({ 'node-role.kubernetes.io/worker': '' }, selector));
  assert.ok(!matchesNodeSelector({ zone: 'a' }, [{ key: 'zone', value: 'b' }]));
});
