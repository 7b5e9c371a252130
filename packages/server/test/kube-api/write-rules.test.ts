import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { raw } from './http.ts';
import { KubeApi } from './index.ts';
import { installKubeDc } from './kube-dc.ts';

/**
 * What every write must satisfy on the double, as on kube-apiserver: name and metadata rules per kind
 * (k8s.io/apimachinery/pkg/api/validation), unknown fields per `fieldValidation`, dry runs, the checks of
 * a few built-in kinds, and the Status each refusal answers with.
 */
const ORGS = '/apis/kube-dc.com/v1/namespaces/acme/organizations';
const org = (name: string, spec: Record<string, unknown> = { email: 'ops@acme.example' }, extra: Record<string, unknown> = {}) => ({
  apiVersion: 'kube-dc.com/v1',
  kind: 'Organization',
  metadata: { name, ...extra },
  spec,
});

describe('write rules of the Kubernetes API double', () => {
  let kube: KubeApi;
  before(async () => {
    kube = await KubeApi.start();
    installKubeDc(kube);
    kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'acme' } });
  });
  after(() => kube.close());

  test('a refused custom resource answers 422 Invalid with one cause per field', async () => {
    const answer = await raw(kube, 'admin', 'POST', ORGS, { body: org('acme', { description: 'Tom & Jerry' }) });
    assert.equal(answer.status, 422);
    assert.equal(answer.body.reason, 'Invalid');
    assert.equal(
      answer.body.message,
      `Organization.kube-dc.com "acme" is invalid: [spec.description: Invalid value: "Tom & Jerry": spec.description in body should match '^[a-zA-Z0-9\\s.,\\-']+$', spec.email: Required value]`,
    );
    assert.deepEqual(answer.body.details, {
      name: 'acme',
      group: 'kube-dc.com',
      kind: 'Organization',
      causes: [
        {
          reason: 'FieldValueInvalid',
          message: `Invalid value: "Tom & Jerry": spec.description in body should match '^[a-zA-Z0-9\\s.,\\-']+$'`,
          field: 'spec.description',
        },
        { reason: 'FieldValueRequired', message: 'Required value', field: 'spec.email' },
      ],
    });
  });

  test('names: a subdomain for most kinds, a label for Namespaces, a DNS-1035 label for Services, name or generateName', async () => {
    const configMap = await raw(kube, 'admin', 'POST', '/api/v1/namespaces/acme/configmaps', { body: { metadata: { name: 'Settings' } } });
    assert.equal(configMap.status, 422);
    assert.match(
      String(configMap.body.message),
      /^ConfigMap "Settings" is invalid: metadata\.name: Invalid value: "Settings": a lowercase RFC 1123 subdomain/,
    );
    const dotted = await raw(kube, 'admin', 'POST', '/api/v1/namespaces', { body: { metadata: { name: 'a.b' } } });
    assert.equal(dotted.body.message, 'Namespace "a.b" is invalid: metadata.name: Invalid value: "a.b": must not contain dots');
    const service = await raw(kube, 'admin', 'POST', '/api/v1/namespaces/acme/services', { body: { metadata: { name: '1st' } } });
    assert.match(
      String(service.body.message),
      /^Service "1st" is invalid: metadata\.name: Invalid value: "1st": a DNS-1035 label must consist/,
    );
    const nameless = await raw(kube, 'admin', 'POST', '/api/v1/namespaces/acme/configmaps', { body: { metadata: {} } });
    assert.equal(nameless.body.message, 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required');
    const generated = await raw(kube, 'admin', 'POST', '/api/v1/namespaces/acme/configmaps', {
      body: { metadata: { generateName: 'cfg-' } },
    });
    assert.equal(generated.status, 201);
    assert.match(String((generated.body.metadata as { name: string }).name), /^cfg-[a-z0-9]{5}$/);
    const role = await raw(kube, 'admin', 'POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/acme/roles', {
      body: { metadata: { name: 'system:Reader' } },
    });
    assert.equal(role.status, 201, 'RBAC names only have to be path segments');
  });

  test('labels, annotations and finalizers follow the qualified-name rules', async () => {
    const answer = await raw(kube, 'admin', 'POST', ORGS, {
      body: org('acme', undefined, { labels: { 'kube-dc.com/x': 'Bad Value' }, annotations: { '-bad': 'x' }, finalizers: ['a/b/c'] }),
    });
    assert.equal(answer.status, 422);
    const causes = (answer.body.details as { causes: Array<{ field: string; message: string }> }).causes;
    assert.deepEqual(
      causes.map((c) => c.field),
      ['metadata.labels', 'metadata.annotations', 'metadata.finalizers'],
    );
    assert.match(causes[0]?.message ?? '', /^Invalid value: "Bad Value": a valid label must be an empty string or consist of alphanumeric/);
    assert.match(causes[2]?.message ?? '', /^Invalid value: "a\/b\/c": a qualified name must consist of alphanumeric characters/);
  });

  test('unknown fields: dropped with a Warning by default, refused under fieldValidation=Strict (400 on create, 422 on patch)', async () => {
    const warned = await raw(kube, 'admin', 'POST', ORGS, { body: org('warned', { email: 'ops@acme.example', colour: 'blue' }) });
    assert.equal(warned.status, 201);
    assert.equal(warned.headers.warning, '299 - "unknown field \\"spec.colour\\""');
    assert.deepEqual(warned.body.spec, { email: 'ops@acme.example' });
    const strict = await raw(kube, 'admin', 'POST', `${ORGS}?fieldValidation=Strict`, {
      body: org('strict', { email: 'ops@acme.example', colour: 'blue' }),
    });
    assert.equal(strict.status, 400);
    assert.equal(
      strict.body.message,
      'Organization in version "v1" cannot be handled as a Organization: strict decoding error: unknown field "spec.colour"',
    );
    const patched = await raw(kube, 'admin', 'PATCH', `${ORGS}/warned?fieldValidation=Strict`, {
      body: { spec: { colour: 'red' } },
      contentType: 'application/merge-patch+json',
    });
    assert.equal(patched.status, 422);
    assert.match(
      String(patched.body.message),
      /^ "" is invalid: patch: Invalid value: "\{.*\}": strict decoding error: unknown field "spec\.colour"$/,
    );
    const ignored = await raw(kube, 'admin', 'POST', `${ORGS}?fieldValidation=Ignore`, {
      body: org('ignored', { email: 'ops@acme.example', colour: 'blue' }),
    });
    assert.equal(ignored.status, 201);
    assert.equal(ignored.headers.warning, undefined);
  });

  test('server-side apply: a field the schema does not declare fails the request, a new object is created (201)', async () => {
    const path = `${ORGS}/applied?fieldManager=test`;
    const refused = await raw(kube, 'admin', 'PATCH', path, {
      body: org('applied', { email: 'ops@acme.example', colour: 'x' }),
      contentType: 'application/apply-patch+yaml',
    });
    assert.equal(refused.status, 500);
    assert.equal(
      refused.body.message,
      'failed to create typed patch object (/applied; kube-dc.com/v1, Kind=Organization): .spec.colour: field not declared in schema',
    );
    const created = await raw(kube, 'admin', 'PATCH', path, { body: org('applied'), contentType: 'application/apply-patch+yaml' });
    assert.equal(created.status, 201);
    const again = await raw(kube, 'admin', 'PATCH', path, { body: org('applied'), contentType: 'application/apply-patch+yaml' });
    assert.equal(again.status, 200);
  });

  test('dryRun=All: every verb answers what it would store and stores nothing', async () => {
    const created = await raw(kube, 'admin', 'POST', `${ORGS}?dryRun=All`, { body: org('dry') });
    assert.equal(created.status, 201);
    assert.equal((created.body.metadata as { resourceVersion?: string }).resourceVersion, undefined);
    assert.equal(kube.tryGet('kube-dc.com/v1', 'Organization', 'dry', 'acme'), undefined);
    const stored = kube.create({ ...org('kept'), metadata: { name: 'kept', namespace: 'acme', finalizers: ['kube-dc.com/organization'] } });
    const patched = await raw(kube, 'admin', 'PATCH', `${ORGS}/kept?dryRun=All`, {
      body: { spec: { description: 'Dry' } },
      contentType: 'application/merge-patch+json',
    });
    assert.deepEqual([patched.status, (patched.body.spec as { description: string }).description], [200, 'Dry']);
    const deleted = await raw(kube, 'admin', 'DELETE', `${ORGS}/kept?dryRun=All`);
    assert.equal(deleted.status, 200);
    assert.ok((deleted.body.metadata as { deletionTimestamp?: string }).deletionTimestamp, 'what the delete would do: mark it');
    assert.deepEqual(kube.get('kube-dc.com/v1', 'Organization', 'kept', 'acme'), stored);
    const invalid = await raw(kube, 'admin', 'POST', `${ORGS}?dryRun=All`, { body: org('dry', {}) });
    assert.equal(invalid.status, 422, 'a dry run is validated like the real write');
    const wrong = await raw(kube, 'admin', 'POST', `${ORGS}?dryRun=Yes`, { body: org('dry') });
    assert.deepEqual([wrong.status, wrong.body.message], [400, 'Invalid dry run value: Yes: supported values: "All"']);
  });

  test('updates: resourceVersion is required for custom resources; uid, name and namespace do not change', async () => {
    const stored = kube.create({ ...org('versioned'), metadata: { name: 'versioned', namespace: 'acme' } });
    const unconditional = await raw(kube, 'admin', 'PUT', `${ORGS}/versioned`, {
      body: { ...org('versioned'), metadata: { name: 'versioned' } },
    });
    assert.deepEqual(
      [unconditional.status, unconditional.body.message],
      // Named by resource, not kind, as genericregistry.Store.Update names it.
      [
        422,
        'organizations.kube-dc.com "versioned" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update',
      ],
    );
    const renamed = await raw(kube, 'admin', 'PUT', `${ORGS}/versioned`, {
      body: { ...stored, metadata: { ...stored.metadata, name: 'other' } },
    });
    assert.deepEqual(
      [renamed.status, renamed.body.message],
      [400, 'the name of the object (other) does not match the name on the URL (versioned)'],
    );
    const uid = await raw(kube, 'admin', 'PUT', `${ORGS}/versioned`, {
      body: { ...stored, metadata: { ...stored.metadata, uid: 'another' } },
    });
    assert.equal(uid.status, 422);
    assert.match(String(uid.body.message), /metadata\.uid: Invalid value: "another": field is immutable/);
  });

  test('custom resources take no strategic merge patch (415), and a create does not set status', async () => {
    kube.create({ ...org('plain'), metadata: { name: 'plain', namespace: 'acme' } });
    const strategic = await raw(kube, 'admin', 'PATCH', `${ORGS}/plain`, {
      body: { spec: {} },
      contentType: 'application/strategic-merge-patch+json',
    });
    assert.deepEqual(
      [strategic.status, strategic.body.message],
      [
        415,
        'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
      ],
    );
    const withStatus = await raw(kube, 'admin', 'POST', ORGS, { body: { ...org('statusless'), status: { ready: true } } });
    assert.equal(withStatus.body.status, undefined);
  });

  test('built-in kinds: quantities and types fail decoding (400); config keys and role bindings fail validation (422)', async () => {
    const quota = await raw(kube, 'admin', 'POST', '/api/v1/namespaces/acme/resourcequotas', {
      body: { metadata: { name: 'q' }, spec: { hard: { cpu: 'lots' } } },
    });
    assert.deepEqual(
      [quota.status, quota.body.message],
      [
        400,
        `ResourceQuota in version "v1" cannot be handled as a ResourceQuota: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`,
      ],
    );
    const negative = await raw(kube, 'admin', 'POST', '/api/v1/namespaces/acme/resourcequotas', {
      body: { metadata: { name: 'q' }, spec: { hard: { cpu: '-1' } } },
    });
    assert.equal(
      negative.body.message,
      'ResourceQuota "q" is invalid: spec.hard[cpu]: Invalid value: "-1": must be greater than or equal to 0',
    );
    const data = await raw(kube, 'admin', 'POST', '/api/v1/namespaces/acme/configmaps', {
      body: { metadata: { name: 'c' }, data: { 'a key': 1 } },
    });
    assert.equal(data.status, 400);
    const key = await raw(kube, 'admin', 'POST', '/api/v1/namespaces/acme/configmaps', {
      body: { metadata: { name: 'c' }, data: { 'a key': 'v' } },
    });
    assert.match(
      String(key.body.message),
      /^ConfigMap "c" is invalid: data\[a key\]: Invalid value: "a key": a valid config key must consist/,
    );
    const binding = await raw(kube, 'admin', 'POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/acme/rolebindings', {
      body: {
        metadata: { name: 'b' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'r' },
        subjects: [{ kind: 'Robot', name: 'x' }],
      },
    });
    assert.equal(
      binding.body.message,
      'RoleBinding.rbac.authorization.k8s.io "b" is invalid: subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"',
    );
  });
});
