import { Ajv } from 'ajv';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Lease } from 'kubernetes-models/coordination.k8s.io/v1/Lease';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import type { RenderedObject } from './helm.ts';

/**
 * Offline schemas for every kind the chart renders. Built-in kinds: the `kubernetes-models` package (its
 * validators are generated from the Kubernetes OpenAPI document). MetalLB's three kinds: no npm package ships
 * their CRDs, so these schemas are written here from MetalLB's API reference (metallb.io/v1beta1),
 * restricted to the fields that exist there and strict about unknown ones.
 */
const BUILT_IN: Record<string, new (data: never) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'coordination.k8s.io/v1/Lease': Lease,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
};

const labelSelector = {
  type: 'object',
  additionalProperties: false,
  properties: {
    matchLabels: { type: 'object', additionalProperties: { type: 'string' } },
    matchExpressions: {
      type: 'array',
      items: {
        type: 'object',
        required: ['key', 'operator'],
        additionalProperties: false,
        properties: { key: { type: 'string' }, operator: { type: 'string' }, values: { type: 'array', items: { type: 'string' } } },
      },
    },
  },
};

const metadata = {
  type: 'object',
  required: ['name', 'namespace'],
  properties: {
    name: { type: 'string', pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63 },
    namespace: { type: 'string', minLength: 1 },
    labels: { type: 'object', additionalProperties: { type: 'string' } },
    annotations: { type: 'object', additionalProperties: { type: 'string' } },
  },
};

const METALLB: Record<string, object> = {
  'metallb.io/v1beta1/IPAddressPool': {
    type: 'object',
    required: ['apiVersion', 'kind', 'metadata', 'spec'],
    properties: {
      apiVersion: { const: 'metallb.io/v1beta1' },
      kind: { const: 'IPAddressPool' },
      metadata,
      spec: {
        type: 'object',
        required: ['addresses'],
        additionalProperties: false,
        properties: {
          addresses: { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } },
          autoAssign: { type: 'boolean' },
          avoidBuggyIPs: { type: 'boolean' },
          serviceAllocation: {
            type: 'object',
            additionalProperties: false,
            properties: {
              priority: { type: 'integer' },
              namespaces: { type: 'array', items: { type: 'string' } },
              namespaceSelectors: { type: 'array', items: labelSelector },
              serviceSelectors: { type: 'array', items: labelSelector },
            },
          },
        },
      },
    },
  },
  'metallb.io/v1beta1/L2Advertisement': {
    type: 'object',
    required: ['apiVersion', 'kind', 'metadata'],
    properties: {
      apiVersion: { const: 'metallb.io/v1beta1' },
      kind: { const: 'L2Advertisement' },
      metadata,
      spec: {
        type: 'object',
        additionalProperties: false,
        properties: {
          ipAddressPools: { type: 'array', items: { type: 'string' } },
          ipAddressPoolSelectors: { type: 'array', items: labelSelector },
          nodeSelectors: { type: 'array', items: labelSelector },
          interfaces: { type: 'array', items: { type: 'string' } },
        },
      },
    },
  },
  'metallb.io/v1beta1/BGPAdvertisement': {
    type: 'object',
    required: ['apiVersion', 'kind', 'metadata'],
    properties: {
      apiVersion: { const: 'metallb.io/v1beta1' },
      kind: { const: 'BGPAdvertisement' },
      metadata,
      spec: {
        type: 'object',
        additionalProperties: false,
        properties: {
          aggregationLength: { type: 'integer', minimum: 0, maximum: 32 },
          aggregationLengthV6: { type: 'integer', minimum: 0, maximum: 128 },
          localPref: { type: 'integer', minimum: 0 },
          communities: { type: 'array', items: { type: 'string' } },
          ipAddressPools: { type: 'array', items: { type: 'string' } },
          ipAddressPoolSelectors: { type: 'array', items: labelSelector },
          nodeSelectors: { type: 'array', items: labelSelector },
          peers: { type: 'array', items: { type: 'string', minLength: 1 } },
        },
      },
    },
  },
};

const ajv = new Ajv({ allErrors: true, strict: true });
const metallbValidators = Object.fromEntries(Object.entries(METALLB).map(([key, schema]) => [key, ajv.compile(schema)]));

/** Throws with the object's kind and name when it does not satisfy its schema (or no schema is known). */
export function validateObject(object: RenderedObject): void {
  const key = `${object.apiVersion}/${object.kind}`;
  const where = `${object.kind} ${object.metadata?.name}`;
  const Model = BUILT_IN[key];
  if (Model) {
    try {
      new Model(object as never).validate();
    } catch (error) {
      throw new Error(`${where}: ${(error as Error).message}`);
    }
    return;
  }
  const validate = metallbValidators[key];
  if (!validate) throw new Error(`${where}: no schema for ${key}`);
  if (!validate(object)) throw new Error(`${where}: ${ajv.errorsText(validate.errors)}`);
}
