import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { CHART, lint, template } from './helm.ts';

interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  items?: Schema;
}

const schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8')) as Schema;
const defaults = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;

const isMap = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/** Paths where values.yaml and the schema disagree: a value without a schema, or a setting values.yaml lacks. */
function mismatches(value: unknown, node: Schema, path: string): string[] {
  if (!isMap(value) || node.properties === undefined) return [];
  const found: string[] = [];
  if (node.additionalProperties !== false) found.push(`${path}: accepts unknown keys`);
  for (const key of Object.keys(value)) {
    const child = node.properties[key];
    if (child === undefined) found.push(`${path}.${key}: not in the schema`);
    else found.push(...mismatches(value[key], child, `${path}.${key}`));
  }
  for (const key of Object.keys(node.properties)) {
    // `health` under an endpoint is there only to be refused with a pointer to backend.health.
    const misplaced = key === 'health' && /^\.platformEndpoints\.\w+$/.test(path);
    if (!(key in value) && !misplaced) found.push(`${path}.${key}: in the schema, not in values.yaml`);
  }
  return found;
}

describe('chart: values.schema.json', () => {
  test('describes exactly the values of values.yaml, and refuses unknown keys at every level', () => {
    assert.deepEqual(mismatches(defaults, schema, ''), []);
    assert.equal(lint({}).status, 0);
  });

  test('a misspelt or mistyped value fails the render and the lint, naming it', () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ serve: { replica: 2 } }, /at '\/serve': additional properties 'replica' not allowed/],
      [{ serve: { replicas: 'two' } }, /at '\/serve\/replicas': got string, want integer/],
      [{ serve: { config: { platform: 'kubernets' } } }, /at '\/serve\/config\/platform': value must be one of 'sandbox', 'kubernetes'/],
      [{ image: { pullpolicy: 'Always' } }, /at '\/image': additional properties 'pullpolicy' not allowed/],
      [{ serve: { persistence: { size: 'lots' } } }, /at '\/serve\/persistence\/size'/],
      [
        { platformEndpoints: { kubeAPI: { advertisementMode: 'BGP' } } },
        /at '\/platformEndpoints\/kubeAPI\/advertisementMode': value must be one of 'l2', 'bgp'/,
      ],
      [
        { platformEndpoints: { edgeGateway: { bgpPeers: 'tor-a' } } },
        /at '\/platformEndpoints\/edgeGateway\/bgpPeers': got string, want array/,
      ],
      [
        { platformEndpoints: { kubeAPI: { backend: { health: { intervalSecond: 3 } } } } },
        /at '\/platformEndpoints\/kubeAPI\/backend\/health': additional properties 'intervalSecond' not allowed/,
      ],
    ];
    for (const [values, message] of cases) {
      const { error } = template(values);
      assert.match(error ?? 'rendered without error', message);
      assert.notEqual(lint(values).status, 0, JSON.stringify(values));
    }
  });

  test("a health block directly under an endpoint fails and points to backend.health (Kube-DC's place for it too)", () => {
    for (const key of ['kubeAPI', 'edgeGateway']) {
      // Disabled or not: the probe would otherwise keep its defaults without a word.
      for (const enabled of [false, true]) {
        const { error } = template({
          platform: { hostnames: { console: 'console.example.com' } },
          platformEndpoints: { [key]: { enabled, vip: '192.0.2.10', health: { path: '/livez', port: 6443 } } },
        });
        assert.match(
          error ?? 'rendered without error',
          new RegExp(
            `platformEndpoints\\.${key}\\.health is not a setting: the probe settings go under platformEndpoints\\.${key}\\.backend\\.health`,
          ),
        );
      }
    }
  });
});
