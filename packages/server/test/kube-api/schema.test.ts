import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { aggregate, errorString, type FieldError } from './field-errors.ts';
import { KUBE_DC_CRD_FILES, kubeDcCrd } from './kube-dc.ts';
import { ResourceRegistry, type ResourceType } from './registry.ts';
import { validateRules } from './schema-cel.ts';
import { validateListTypes } from './schema-structural.ts';
import { type JsonSchema, validateSchema } from './schema-validate.ts';
import type { KubeObject } from './store.ts';
import { decode } from './validation.ts';

/**
 * The schema validator on Kube-DC's real CRDs (test/kube-dc/crds): each rule kind a structural schema has,
 * with the messages kube-apiserver gives (kube-openapi's validator behind apiextensions-apiserver's
 * kubeOpenAPIResultToFieldErrors; field errors as k8s.io/apimachinery/pkg/util/validation/field prints them).
 */
const registry = new ResourceRegistry();
for (const file of KUBE_DC_CRD_FILES) registry.registerDefinition(kubeDcCrd(file));

function typeOf(kind: string): ResourceType {
  const type = registry.all().find((t) => t.kind === kind);
  assert.ok(type?.schema, `${kind} has a schema`);
  return type;
}

const schemaOf = (kind: string): JsonSchema => typeOf(kind).schema as JsonSchema;

function object(kind: string, spec: Record<string, unknown>, extra: Record<string, unknown> = {}): KubeObject {
  const type = typeOf(kind);
  return { apiVersion: `${type.group}/${type.version}`, kind, metadata: { name: 'x', namespace: 'acme' }, spec, ...extra };
}

/** Decoded as the server decodes a request body, then validated: the errors as the server prints them. */
function errorsOf(kind: string, value: KubeObject, old?: KubeObject): string[] {
  decode(typeOf(kind), value);
  const schema = schemaOf(kind);
  return [...validateSchema(schema, value, old ? { old: { value: old } } : {}), ...validateListTypes(value, schema)].map(errorString);
}

describe('structural schema validation on the vendored Kube-DC CRDs', () => {
  test('the CRDs vendored are the ones installKubeDc creates, each with its schema', () => {
    assert.deepEqual(
      registry
        .all()
        .filter((t) => t.schema)
        .map((t) => `${t.kind}.${t.group}/${t.version}`)
        .sort(),
      [
        'KdcDatabase.db.kube-dc.com/v1alpha1',
        'Organization.kube-dc.com/v1',
        'OrganizationGroup.kube-dc.com/v1',
        'Partner.kube-dc.com/v1',
        'Project.kube-dc.com/v1',
      ],
    );
  });

  test('required: an Organization without spec.email', () => {
    assert.deepEqual(errorsOf('Organization', object('Organization', {})), ['spec.email: Required value']);
  });

  test("pattern, as ECMA-262 regex: Organization.spec.description admits letters, digits, spaces and .,-' only", () => {
    assert.deepEqual(
      errorsOf('Organization', object('Organization', { email: 'ops@acme.example', description: "O'Brien, Smith-Jones Ltd." })),
      [],
    );
    // `\s` is RE2's on the server: ASCII whitespace only, so a no-break space is refused.
    assert.equal(errorsOf('Organization', object('Organization', { email: 'ops@acme.example', description: 'Acme\u00a0Inc' })).length, 1);
    assert.deepEqual(errorsOf('Organization', object('Organization', { email: 'ops@acme.example', description: 'Tom & Jerry' })), [
      `spec.description: Invalid value: "Tom & Jerry": spec.description in body should match '^[a-zA-Z0-9\\s.,\\-']+$'`,
    ]);
  });

  test('maxLength is "Too long" with no value; minLength is an invalid value; lengths count characters', () => {
    assert.deepEqual(errorsOf('Organization', object('Organization', { email: 'ops@acme.example', description: 'a'.repeat(129) })), [
      'spec.description: Too long: may not be more than 128 bytes',
    ]);
    assert.deepEqual(errorsOf('Organization', object('Organization', { email: 'a@b' })), [
      'spec.email: Invalid value: "a@b": spec.email in body should be at least 5 chars long',
    ]);
    assert.deepEqual(errorsOf('Partner', object('Partner', { displayName: 'é'.repeat(128) })), []);
  });

  test('enum: Unsupported value with the supported ones quoted', () => {
    assert.deepEqual(errorsOf('Project', object('Project', { cidrBlock: '10.0.0.0/24', egressNetworkType: 'x' })), [
      'spec.egressNetworkType: Unsupported value: "x": supported values: "public", "cloud"',
    ]);
  });

  test('types: the value shown is the JSON type that was given', () => {
    assert.deepEqual(errorsOf('Partner', object('Partner', { displayName: 'P', suspended: 'no', limits: { maxCustomers: 'ten' } })), [
      'spec.limits.maxCustomers: Invalid value: "string": spec.limits.maxCustomers in body must be of type integer: "string"',
      'spec.suspended: Invalid value: "string": spec.suspended in body must be of type boolean: "string"',
    ]);
    assert.deepEqual(errorsOf('Partner', object('Partner', { displayName: 'P', limits: { maxCustomers: 1.5 } })), [
      'spec.limits.maxCustomers: Invalid value: "number": spec.limits.maxCustomers in body must be of type integer: "number"',
    ]);
  });

  test('minimum and maximum, in additionalProperties maps too; int32 is range-checked', () => {
    const spec = {
      displayName: 'P',
      limits: {
        rateLimit: { burst: 20_000 },
        capacity: { gpu: { 'nvidia-a100': { devices: -1 } } },
        maxProjectsPerCustomer: 3_000_000_000,
      },
    };
    assert.deepEqual(errorsOf('Partner', object('Partner', spec)), [
      'spec.limits.capacity.gpu.nvidia-a100.devices: Invalid value: -1: spec.limits.capacity.gpu.nvidia-a100.devices in body should be greater than or equal to 0',
      '<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.limits.maxProjectsPerCustomer',
      'spec.limits.rateLimit.burst: Invalid value: 20000: spec.limits.rateLimit.burst in body should be less than or equal to 10000',
    ]);
  });

  test('maxItems: Too many, with the count', () => {
    const plans = Array.from({ length: 101 }, (_, i) => `plan-${i}`);
    assert.deepEqual(errorsOf('Partner', object('Partner', { displayName: 'P', limits: { allowedPlans: plans } })), [
      'spec.limits.allowedPlans: Too many: 101: must have at most 100 items',
    ]);
  });

  test('date-time format, and the condition rules every Kube-DC status carries', () => {
    const status = {
      ready: true,
      conditions: [{ type: 'Ready', status: 'Maybe', reason: 'not camel', message: 'm', lastTransitionTime: 'yesterday' }],
    };
    assert.deepEqual(errorsOf('Project', object('Project', { cidrBlock: '10.0.0.0/24', egressNetworkType: 'cloud' }, { status })), [
      'status.conditions[0].lastTransitionTime: Invalid value: "yesterday": status.conditions[0].lastTransitionTime in body must be of type date-time: "yesterday"',
      `status.conditions[0].reason: Invalid value: "not camel": status.conditions[0].reason in body should match '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'`,
      'status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown"',
    ]);
  });

  test('x-kubernetes-list-type map: two items with the same keys are a Duplicate value, Go-printed', () => {
    const spec = { email: 'ops@acme.example', security: { certificateDomains: [{ project: 'web' }, { project: 'web' }] } };
    assert.deepEqual(errorsOf('Organization', object('Organization', spec)), [
      'spec.security.certificateDomains[1]: Duplicate value: map[string]interface {}{"project":"web"}',
    ]);
  });

  test('defaults fill in missing fields where their parent exists, nested defaults included', () => {
    const partner = object('Partner', {
      displayName: 'P',
      limits: { rateLimit: {} },
      webhook: { url: 'https://p.example/hook', secretRef: { name: 's' } },
    });
    assert.deepEqual(errorsOf('Partner', partner), []);
    assert.deepEqual(partner.spec, {
      displayName: 'P',
      suspended: false,
      limits: { maxCustomers: 0, maxOpenOperations: 100, maxProjectsPerCustomer: 10, rateLimit: { burst: 40, requestsPerMinute: 120 } },
      webhook: { enabled: true, url: 'https://p.example/hook', secretRef: { name: 's', key: 'secret' } },
    });
    const database = object('KdcDatabase', { engine: 'postgresql' });
    assert.deepEqual(errorsOf('KdcDatabase', database), [], 'the required cpu, memory, storage and version all have defaults');
    assert.deepEqual(database.spec, {
      engine: 'postgresql',
      cpu: '1',
      databaseName: 'app',
      memory: '2Gi',
      replicas: 2,
      storage: '20Gi',
      username: 'app',
      version: '16',
    });
  });

  test('unknown fields are pruned, and their paths are what strict field validation reports', () => {
    const org = object('Organization', {
      email: 'ops@acme.example',
      colour: 'blue',
      security: { certificateDomains: [{ project: 'a', x: 1 }] },
    });
    (org.metadata as Record<string, unknown>).owner = 'me';
    (org as Record<string, unknown>).extra = true;
    assert.deepEqual(decode(typeOf('Organization'), org), [
      'metadata.owner',
      'extra',
      'spec.colour',
      'spec.security.certificateDomains[0].x',
    ]);
    assert.deepEqual(org.spec, { email: 'ops@acme.example', security: { certificateDomains: [{ project: 'a' }] } });
  });

  test('nullable: a null is dropped where the field is not nullable (its default then applies), kept where it is', () => {
    const schema: JsonSchema = {
      type: 'object',
      properties: {
        spec: {
          type: 'object',
          properties: {
            plain: { type: 'string' },
            defaulted: { type: 'string', default: 'd' },
            optional: { type: 'string', nullable: true },
            list: { type: 'array', minItems: 1, items: { type: 'string' } },
          },
        },
      },
    };
    const type: ResourceType = { group: 'example.com', version: 'v1', kind: 'Thing', plural: 'things', namespaced: true, schema };
    const thing: KubeObject = { metadata: { name: 't' }, spec: { plain: null, defaulted: null, optional: null, list: [] } };
    decode(type, thing);
    assert.deepEqual(thing.spec, { defaulted: 'd', optional: null, list: [] });
    assert.deepEqual(validateSchema(schema, thing).map(errorString), [
      'spec.list: Invalid value: 0: spec.list in body should have at least 1 items',
    ]);
  });

  test('on update, a field left as it was is not checked again (ratcheting); a changed one is', () => {
    const stored = object('Organization', { email: 'ops@acme.example', description: 'Tom & Jerry' });
    const relabelled = structuredClone(stored);
    relabelled.metadata.labels = { team: 'a' };
    assert.deepEqual(errorsOf('Organization', relabelled, stored), []);
    const edited = object('Organization', { email: 'ops@acme.example', description: 'Tom & Jerry & Co' });
    assert.equal(errorsOf('Organization', edited, stored).length, 1);
  });

  test('the status subresource is validated against the status schema, its messages relative to it', () => {
    const status = { ready: 'yes' };
    const errors: FieldError[] = validateSchema(schemaOf('Project').properties?.status as JsonSchema, status, { fieldPrefix: 'status' });
    assert.equal(aggregate(errors), 'status.ready: Invalid value: "string": ready in body must be of type boolean: "string"');
  });
});

describe('x-kubernetes-validations (CEL) on the vendored CRDs', () => {
  const project = (egress: string) => object('Project', { cidrBlock: '10.0.0.0/24', egressNetworkType: egress });

  test('Project.spec.egressNetworkType is immutable: a transition rule, checked on update only', () => {
    assert.deepEqual(validateRules(schemaOf('Project'), project('public'), undefined).errors, []);
    const changed = validateRules(schemaOf('Project'), project('public'), { value: project('cloud') });
    assert.deepEqual(changed.errors.map(errorString), ['spec.egressNetworkType: Invalid value: "string": egressNetworkType is immutable']);
    assert.deepEqual(validateRules(schemaOf('Project'), project('cloud'), { value: project('cloud') }).errors, []);
  });

  test('a rule without oldSelf on a value the update did not change only warns; on a changed value it fails', () => {
    const schema: JsonSchema = {
      type: 'object',
      properties: {
        spec: {
          type: 'object',
          properties: { size: { type: 'integer', 'x-kubernetes-validations': [{ rule: 'self <= 10' }] }, note: { type: 'string' } },
        },
      },
    };
    const old = { spec: { size: 20, note: 'a' } };
    const kept = validateRules(schema, { spec: { size: 20, note: 'b' } }, { value: old });
    assert.deepEqual(kept.errors, []);
    assert.deepEqual(kept.warnings.map(errorString), ['spec.size: Invalid value: "integer": failed rule: self <= 10']);
    assert.deepEqual(validateRules(schema, { spec: { size: 21 } }, { value: old }).errors.map(errorString), [
      'spec.size: Invalid value: "integer": failed rule: self <= 10',
    ]);
  });

  test('a rule that errors, and messageExpression and reason', () => {
    const schema: JsonSchema = {
      type: 'object',
      properties: {
        spec: {
          type: 'object',
          'x-kubernetes-validations': [
            { rule: 'self.missing == 1' },
            { rule: 'self.size < 5', messageExpression: "'size ' + string(self.size) + ' is too big'", reason: 'FieldValueForbidden' },
          ],
          properties: { size: { type: 'integer' } },
        },
      },
    };
    assert.deepEqual(validateRules(schema, { spec: { size: 7 } }, undefined).errors.map(errorString), [
      'spec: Invalid value: "object": no such key: missing evaluating rule: self.missing == 1',
      'spec: Forbidden: size 7 is too big',
    ]);
  });
});
