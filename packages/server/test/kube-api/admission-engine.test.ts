import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { raw, refusal } from './http.ts';
import { KubeApi, type KubeObject } from './index.ts';

const POLICY = 'admissionregistration.k8s.io/v1';

function policy(name: string, spec: Record<string, unknown>): KubeObject {
  return {
    apiVersion: POLICY,
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: {
        resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['configmaps'] }],
      },
      ...spec,
    },
  };
}

function binding(name: string, policyName: string, spec: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: POLICY,
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name },
    spec: { policyName, validationActions: ['Deny'], ...spec },
  };
}

/**
 * The ValidatingAdmissionPolicy engine itself, with small policies on ConfigMaps: what a policy author
 * sees on a cluster (validator.go and dispatcher.go in k8s.io/apiserver/pkg/admission/plugin/policy/validating).
 */
describe('ValidatingAdmissionPolicy on the Kubernetes API double', () => {
  let kube: KubeApi;
  let core: CoreV1Api;
  before(async () => {
    kube = await KubeApi.start();
    core = kube.kubeConfig('dev').makeApiClient(CoreV1Api);
    kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'prod', labels: { env: 'prod' } } });
  });
  after(() => kube.close());
  afterEach(() => {
    for (const b of kube.list(POLICY, 'ValidatingAdmissionPolicyBinding'))
      kube.delete(POLICY, 'ValidatingAdmissionPolicyBinding', b.metadata.name ?? '');
    for (const p of kube.list(POLICY, 'ValidatingAdmissionPolicy')) kube.delete(POLICY, 'ValidatingAdmissionPolicy', p.metadata.name ?? '');
  });
  const configMap = (name: string, data: Record<string, string> = {}, labels: Record<string, string> = {}) => ({
    metadata: { name, labels },
    data,
  });

  test('a failed validation: message, messageExpression, the expression itself; reason Invalid is 422, Forbidden 403', async () => {
    kube.create(
      policy('size', {
        variables: [{ name: 'keys', expression: 'has(object.data) ? size(object.data) : 0' }],
        validations: [
          { expression: 'variables.keys <= 2', messageExpression: "'too many keys: ' + string(variables.keys)" },
          { expression: "!has(object.data) || !('password' in object.data)", message: 'no passwords in ConfigMaps', reason: 'Forbidden' },
          { expression: "object.metadata.name != 'reserved'" },
        ],
      }),
    );
    kube.create(binding('size-everywhere', 'size'));
    const many = await refusal(
      core.createNamespacedConfigMap({ namespace: 'default', body: configMap('many', { a: '1', b: '2', c: '3' }) }),
    );
    assert.equal(many.code, 422);
    assert.equal(many.reason, 'Invalid');
    assert.equal(
      many.message,
      `configmaps "many" is forbidden: ValidatingAdmissionPolicy 'size' with binding 'size-everywhere' denied request: too many keys: 3`,
    );
    assert.deepEqual(many.details, {
      name: 'many',
      kind: 'configmaps',
      causes: [{ message: "ValidatingAdmissionPolicy 'size' with binding 'size-everywhere' denied request: too many keys: 3" }],
    });
    const secret = await refusal(core.createNamespacedConfigMap({ namespace: 'default', body: configMap('creds', { password: 'x' }) }));
    assert.equal(secret.code, 403);
    assert.equal(secret.reason, 'Forbidden');
    assert.match(secret.message, /denied request: no passwords in ConfigMaps$/);
    const reserved = await refusal(core.createNamespacedConfigMap({ namespace: 'default', body: configMap('reserved') }));
    assert.match(reserved.message, /denied request: failed expression: object.metadata.name != 'reserved'$/);
    await core.createNamespacedConfigMap({ namespace: 'default', body: configMap('fine', { a: '1' }) });
  });

  test('matchConditions decide whether a policy applies; the binding narrows it by namespace and object labels', async () => {
    kube.create(
      policy('no-latest', {
        matchConditions: [{ name: 'not-admins', expression: "!('system:masters' in request.userInfo.groups)" }],
        validations: [
          { expression: "!has(object.data) || !object.data.exists(k, object.data[k] == 'latest')", message: 'pin your versions' },
        ],
      }),
    );
    kube.create(
      binding('no-latest-in-prod', 'no-latest', {
        matchResources: {
          namespaceSelector: { matchExpressions: [{ key: 'env', operator: 'In', values: ['prod'] }] },
          objectSelector: { matchLabels: { checked: 'yes' } },
        },
      }),
    );
    const latest = { image: 'latest' };
    assert.equal(
      (await refusal(core.createNamespacedConfigMap({ namespace: 'prod', body: configMap('a', latest, { checked: 'yes' }) }))).code,
      422,
    );
    await core.createNamespacedConfigMap({ namespace: 'prod', body: configMap('b', latest) });
    await core.createNamespacedConfigMap({ namespace: 'default', body: configMap('c', latest, { checked: 'yes' }) });
    await kube
      .kubeConfig('admin')
      .makeApiClient(CoreV1Api)
      .createNamespacedConfigMap({ namespace: 'prod', body: configMap('d', latest, { checked: 'yes' }) });
    // An UPDATE that moves the object out of the selector is still checked: the old object matched.
    const moved = core.replaceNamespacedConfigMap({ namespace: 'prod', name: 'd', body: configMap('d', latest) });
    assert.equal((await refusal(moved)).code, 422);
  });

  test('oldObject, request and namespaceObject are what Kubernetes gives a policy', async () => {
    kube.create(
      policy('immutable-owner', {
        matchConstraints: {
          resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE', 'DELETE'], resources: ['configmaps'] }],
        },
        validations: [
          { expression: "request.operation != 'CREATE' || oldObject == null", message: 'oldObject is null on CREATE' },
          {
            expression: "request.operation != 'DELETE' || (object == null && oldObject.metadata.name == request.name)",
            message: 'object is null on DELETE',
          },
          {
            expression: "request.operation != 'UPDATE' || object.data.owner == oldObject.data.owner",
            messageExpression:
              "'owner is set by ' + oldObject.data.owner + ', not ' + request.userInfo.username + ' in ' + namespaceObject.metadata.labels.env",
          },
        ],
      }),
    );
    kube.create(binding('immutable-owner', 'immutable-owner'));
    await core.createNamespacedConfigMap({ namespace: 'prod', body: configMap('app', { owner: 'team-a' }) });
    const changed = await refusal(
      core.replaceNamespacedConfigMap({ namespace: 'prod', name: 'app', body: configMap('app', { owner: 'team-b' }) }),
    );
    assert.match(changed.message, /denied request: owner is set by team-a, not dev in prod$/);
    await core.deleteNamespacedConfigMap({ namespace: 'prod', name: 'app' });
  });

  test('failurePolicy: an expression error denies under Fail and is ignored under Ignore', async () => {
    kube.create(policy('strict', { validations: [{ expression: "object.data.mode == 'x'" }] }));
    kube.create(binding('strict', 'strict'));
    const error = await refusal(core.createNamespacedConfigMap({ namespace: 'default', body: configMap('no-data') }));
    assert.equal(error.code, 422);
    assert.match(
      error.message,
      /^configmaps "no-data" is forbidden: ValidatingAdmissionPolicy 'strict' with binding 'strict' denied request: expression 'object.data.mode == 'x'' resulted in error: /,
    );
    kube.patch(POLICY, 'ValidatingAdmissionPolicy', 'strict', undefined, { spec: { failurePolicy: 'Ignore' } });
    await core.createNamespacedConfigMap({ namespace: 'default', body: configMap('no-data') });
  });

  const labelled = () =>
    policy('labelled', {
      validations: [{ expression: 'has(object.metadata.labels) && size(object.metadata.labels) > 0', message: 'label it' }],
    });

  test('validationActions: Warn answers with a Warning header and admits', async () => {
    kube.create(labelled());
    kube.create(binding('labelled-warn', 'labelled', { validationActions: ['Warn', 'Audit'] }));
    const warned = await raw(kube, 'dev', 'POST', '/api/v1/namespaces/default/configmaps', { body: { metadata: { name: 'bare' } } });
    assert.equal(warned.status, 201);
    assert.equal(
      warned.headers.warning,
      `299 - "Validation failed for ValidatingAdmissionPolicy 'labelled' with binding 'labelled-warn': label it"`,
    );
  });

  test('validationActions: Audit admits silently; dry runs are judged too', async () => {
    kube.create(labelled());
    kube.create(binding('labelled-warn', 'labelled', { validationActions: ['Audit'] }));
    const audited = await raw(kube, 'dev', 'POST', '/api/v1/namespaces/default/configmaps', { body: { metadata: { name: 'bare-2' } } });
    assert.equal(audited.status, 201);
    assert.equal(audited.headers.warning, undefined);
    kube.patch(POLICY, 'ValidatingAdmissionPolicyBinding', 'labelled-warn', undefined, { spec: { validationActions: ['Deny'] } });
    const dry = await raw(kube, 'dev', 'POST', '/api/v1/namespaces/default/configmaps?dryRun=All', {
      body: { metadata: { name: 'bare-3' } },
    });
    assert.equal(dry.status, 422);
    assert.equal(kube.tryGet('v1', 'ConfigMap', 'bare-3', 'default'), undefined);
  });

  test('a policy whose expression does not parse is refused when it is created', async () => {
    const body = policy('broken', { validations: [{ expression: 'object.(' }] });
    const answer = await raw(kube, 'admin', 'POST', '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies', { body });
    assert.equal(answer.status, 422);
    assert.match(
      String(answer.body.message),
      /^ValidatingAdmissionPolicy.admissionregistration.k8s.io "broken" is invalid: spec.validations\[0\].expression: Invalid value: "object.\(": compilation failed: /,
    );
  });
});
