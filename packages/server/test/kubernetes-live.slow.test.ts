import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertError, http, partnerApi } from './client.ts';
import { consoleCookie, csrfFrom } from './console-session.ts';
import { startTestServer, type TestServer, testDatabases } from './harness.ts';
import { type KubernetesFixture, startKubernetesFixture } from './kubernetes-platform.ts';
import { createCustomer, partnerWithModes, type Tokens } from './provisioning.ts';

const ORG = ['kube-dc.com/v1', 'Organization'] as const;
const PROJECT = ['kube-dc.com/v1', 'Project'] as const;
const VM = ['kubevirt.io/v1', 'VirtualMachine'] as const;

/**
 * TENANTRY_PLATFORM=kubernetes, end to end: `tenantry serve` configured the way an operator configures
 * it (a kubeconfig file, the identity provider's URL and secret file, an address pool) routes live mode
 * to the kubernetes driver and test mode to the sandbox. A partner's live customer becomes a Kube-DC
 * Organization with a realm and a Project; suspension halts its VMs; a cluster that does not answer is
 * 503 UNAVAILABLE; deletion tears it all down. On the Kubernetes, Kube-DC and Keycloak doubles: the
 * cluster acts when the test lets it (`settle`), and the server's clock is moved past each wait.
 */
for (const target of testDatabases()) {
  describe(`live mode on the kubernetes platform [${target.name}]`, () => {
    let fx: KubernetesFixture;
    let server: TestServer;
    let tokens: Tokens;
    let dir: string;

    before(async () => {
      fx = await startKubernetesFixture();
      // Kube-DC's chart installs the OS image catalogue as a ConfigMap in its own namespace.
      fx.kube?.create({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'images-configmap', namespace: 'kube-dc' },
        data: { 'images.yaml': readFileSync(new URL('../src/images/default-images.yaml', import.meta.url), 'utf8') },
      });
      dir = mkdtempSync(join(tmpdir(), 'tenantry-live-'));
      writeFileSync(join(dir, 'kubeconfig'), fx.kubeConfig.exportConfig(), { mode: 0o600 });
      writeFileSync(join(dir, 'idp-secret'), fx.config.identity.clientSecret, { mode: 0o600 });
      server = await startTestServer(target, {
        env: {
          TENANTRY_PLATFORM: 'kubernetes',
          TENANTRY_KUBECONFIG: join(dir, 'kubeconfig'),
          TENANTRY_KUBERNETES_NAMESPACE: 'tenantry',
          TENANTRY_IDP_URL: fx.config.identity.url,
          TENANTRY_IDP_CLIENT_ID: fx.config.identity.clientId,
          TENANTRY_IDP_CLIENT_SECRET_FILE: join(dir, 'idp-secret'),
          TENANTRY_ADDRESS_POOL: '10.100.0.0/22',
          TENANTRY_KUBE_DC_SERVICE_ACCOUNT: fx.config.kubeDcServiceAccount ?? '',
        },
      });
      tokens = await partnerWithModes(server, 'acme');
    });
    after(async () => {
      await server?.stop();
      await fx?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    /** Lets the cluster act and moves the server's clock past the driver's next look, until `check` holds. */
    async function settle<T>(read: () => Promise<T>, check: (value: T) => boolean, what: string): Promise<T> {
      for (let round = 0; round < 200; round++) {
        const value = await read();
        if (check(value)) return value;
        await fx.settle();
        server.clock.advance(2_500);
        await new Promise((ok) => setTimeout(ok, 25));
      }
      assert.fail(`${what} did not happen`);
    }

    const runStrategy = (namespace: string) =>
      (fx.kube?.get(VM[0], VM[1], 'api', namespace).spec as { runStrategy?: string } | undefined)?.runStrategy;

    const operation = (customer: string, id: string) => async () =>
      (
        await partnerApi<{ data: { status: string; error: unknown } }>(server, 'GET', `/customers/${customer}/operations/${id}`, {
          token: tokens.live,
        })
      ).body.data;

    test('a live customer becomes an Organization with its realm, owner and Project; a test customer stays on the sandbox', async () => {
      const created = await createCustomer(server, tokens.live, 'globex');
      const sandboxed = await createCustomer(server, tokens.test, 'initech');
      const done = await settle(
        operation('globex', created.operation.id),
        (op) => op.status !== 'pending' && op.status !== 'running',
        'provisioning',
      );
      assert.equal(done.status, 'succeeded', JSON.stringify(done));

      const customer = await partnerApi<{ data: { status: string; projects: { name: string; namespace: string; state: string }[] } }>(
        server,
        'GET',
        '/customers/globex',
        { token: tokens.live },
      );
      assert.equal(customer.body.data.status, 'active');
      const [project] = customer.body.data.projects;
      assert.equal(project?.state, 'ready');
      const organization = project?.namespace.replace(/-default$/, '') ?? '';
      const org = fx.kube?.get(ORG[0], ORG[1], organization, organization);
      assert.equal((org?.status as { ready?: boolean } | undefined)?.ready, true, 'the Organization is ready on the cluster');
      assert.ok(fx.kube?.tryGet(PROJECT[0], PROJECT[1], 'default', organization), 'the Project is on the cluster');
      assert.ok(fx.kube?.tryGet('v1', 'Namespace', project?.namespace ?? ''), "the Project's namespace exists");
      assert.equal(fx.keycloak?.user(organization, 'owner')?.email, 'owner@globex.example', 'the owner is in the realm');

      // The console login: Keycloak is asked whether alice may log in; the link is Tenantry's console, whose
      // OS list and VM form work for the live customer, and the VM lands on the cluster.
      const namespace = project?.namespace ?? '';
      const { cookie } = await consoleCookie(server, tokens.live, 'globex', 'owner');
      const images = await http<{ OS_NAME: string }[]>(server.partnerUrl, 'GET', `/api/create-vm/${namespace}/os-images`, {
        headers: { cookie },
      });
      assert.equal(images.status, 200, images.text);
      const ubuntu = images.body.find((image) => image.OS_NAME.startsWith('Ubuntu'))?.OS_NAME ?? '';
      const page = await http(server.partnerUrl, 'GET', '/console', { headers: { cookie } });
      const form = await fetch(`${server.partnerUrl}/console/vms`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(server.partnerUrl).origin, cookie },
        body: new URLSearchParams({
          csrf: csrfFrom(page.text),
          project: 'default',
          name: 'web-1',
          os: ubuntu,
          vcpu: '1',
          memory_gib: '2',
          storage_gib: '20',
        }),
      });
      const answer = await form.text();
      assert.equal(form.status, 303, answer.match(/<[^>]*(?:error|alert)[^>]*>[^<]+/g)?.join(' | ') ?? answer);
      assert.ok(fx.kube?.get(VM[0], VM[1], 'web-1', namespace), 'the VM is on the cluster');
      // Its root disk is a DataVolume of its own, as Kube-DC's wizard makes it, imported from the image.
      const disk = fx.kube?.get('cdi.kubevirt.io/v1beta1', 'DataVolume', 'web-1-disk', namespace);
      const source = (disk?.spec as { source?: { http?: { url?: string } } } | undefined)?.source;
      assert.match(source?.http?.url ?? '', /^https:\/\/cloud-images\.ubuntu\.com\//);
      assert.match((await http(server.partnerUrl, 'GET', '/console', { headers: { cookie } })).text, /<strong>web-1<\/strong>/);
      // Its Stop button halts it on the cluster, as virtctl stop does; Start runs it again.
      const button = (action: string) =>
        fetch(`${server.partnerUrl}/console/vms/default/web-1/${action}`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(server.partnerUrl).origin, cookie },
          body: new URLSearchParams({ csrf: csrfFrom(page.text) }),
        });
      const runStrategy = () => (fx.kube?.get(VM[0], VM[1], 'web-1', namespace)?.spec as { runStrategy?: string } | undefined)?.runStrategy;
      assert.equal((await button('stop')).status, 303);
      if (fx.kube) assert.equal(runStrategy(), 'Halted');
      assert.match(
        (await http(server.partnerUrl, 'GET', '/console', { headers: { cookie } })).text,
        /<span class="badge bad">stopped<\/span>/,
      );
      assert.equal((await button('start')).status, 303);
      if (fx.kube) assert.equal(runStrategy(), 'Always');
      // A cluster that does not answer: the console says so as a page (503, Retry-After), not as JSON.
      fx.kube?.faults.failNext({ status: 503, count: 1_000, match: () => true });
      const down = await http(server.partnerUrl, 'GET', '/console', { headers: { cookie } });
      fx.kube?.faults.clear();
      assert.equal(down.status, 503);
      assert.match(down.headers.get('content-type') ?? '', /^text\/html/);
      assert.ok(Number(down.headers.get('retry-after')) > 0);
      assert.match(down.text, /The platform is not answering/);
      // The customer deletes it from the console, its disk with it: the rest of the suite starts from no VM.
      assert.equal((await button('delete')).status, 303);
      if (fx.kube) {
        assert.equal(fx.kube.tryGet(VM[0], VM[1], 'web-1', namespace), undefined);
        assert.equal(fx.kube.tryGet('cdi.kubevirt.io/v1beta1', 'DataVolume', 'web-1-disk', namespace), undefined);
      }

      // Test mode is the sandbox: nothing of initech reaches the cluster.
      const test = await settle(
        async () =>
          (
            await partnerApi<{ data: { status: string } }>(server, 'GET', `/customers/initech/operations/${sandboxed.operation.id}`, {
              token: tokens.test,
            })
          ).body.data,
        (op) => op.status === 'succeeded',
        'the sandbox provisioning',
      );
      assert.equal(test.status, 'succeeded');
      const organizations = fx.kube?.list(ORG[0], ORG[1]).map((o) => o.metadata.name) ?? [];
      assert.deepEqual(organizations, [organization], 'only the live customer is on the cluster');
    });

    test('a project cap set before its project exists reaches the project once it is made', async () => {
      const quota = await partnerApi<{ data: { revision: number; quota: Record<string, unknown> } }>(
        server,
        'GET',
        '/customers/globex/quota',
        {
          token: tokens.live,
        },
      );
      const put = await partnerApi(server, 'PUT', '/customers/globex/quota', {
        token: tokens.live,
        body: { revision: quota.body.data.revision, quota: quota.body.data.quota, project_caps: { web: { vcpu: 2 } } },
      });
      assert.equal(put.status, 200, put.text);
      const made = await partnerApi<{ data: { operation: { id: string }; project: { namespace: string } } }>(
        server,
        'POST',
        '/customers/globex/projects',
        { token: tokens.live, body: { name: 'web' } },
      );
      assert.equal(made.status, 202, made.text);
      const namespace = made.body.data.project.namespace;
      const done = await settle(
        operation('globex', made.body.data.operation.id),
        (op) => op.status === 'succeeded' || op.status === 'failed',
        'the project',
      );
      assert.equal(done.status, 'succeeded', JSON.stringify(done));
      const cap = await settle(
        async () => fx.kube?.tryGet('v1', 'ResourceQuota', 'tenantry-project-cap', namespace),
        (rq) => rq !== undefined,
        "the project cap's ResourceQuota",
      );
      assert.equal((cap?.spec as { hard?: Record<string, string> } | undefined)?.hard?.['requests.cpu'], '2');
    });

    test('suspension halts the running VMs and resume starts them; a cluster that does not answer is 503 UNAVAILABLE', async () => {
      const customer = await partnerApi<{ data: { projects: { namespace: string }[] } }>(server, 'GET', '/customers/globex', {
        token: tokens.live,
      });
      const namespace = customer.body.data.projects[0]?.namespace ?? '';
      fx.kube?.create({ apiVersion: VM[0], kind: VM[1], metadata: { name: 'api', namespace }, spec: { runStrategy: 'Always' } });

      const suspended = await partnerApi<{ data: { workloads_running: number } }>(server, 'POST', '/customers/globex/suspend', {
        token: tokens.live,
        body: { reason: 'billing' },
      });
      assert.equal(suspended.status, 200, suspended.text);
      assert.equal(runStrategy(namespace), 'Halted', 'the VM is halted on the cluster');

      // Every request of the cluster fails: resume cannot tell what runs, and says so.
      fx.kube?.faults.failNext({ status: 503, count: 1_000, match: () => true });
      const refused = await partnerApi(server, 'POST', '/customers/globex/resume', { token: tokens.live });
      assertError(refused, 503, 'UNAVAILABLE');
      assert.ok(Number(refused.headers.get('retry-after')) > 0, 'Retry-After says when to try again');
      fx.kube?.faults.clear();

      const resumed = await partnerApi<{ data: { workloads_running: number } }>(server, 'POST', '/customers/globex/resume', {
        token: tokens.live,
      });
      assert.equal(resumed.status, 200, resumed.text);
      assert.equal(resumed.body.data.workloads_running, 1);
      assert.equal(runStrategy(namespace), 'Always', 'the VM runs again');
    });

    test('usage without a metrics source is 503 UNAVAILABLE, never a zero', async () => {
      assertError(await partnerApi(server, 'GET', '/customers/globex/usage', { token: tokens.live }), 503, 'UNAVAILABLE');
    });

    test('deleting the customer: refused while VMs live; then its Organization, Projects, namespaces and realm go', async () => {
      const customer = await partnerApi<{ data: { projects: { namespace: string }[] } }>(server, 'GET', '/customers/globex', {
        token: tokens.live,
      });
      const organization = customer.body.data.projects[0]?.namespace.replace(/-default$/, '') ?? '';
      // Live VMs block a deletion (the partner removes them first), read from the cluster itself.
      const blocked = await partnerApi(server, 'DELETE', '/customers/globex?mode=immediate', { token: tokens.live });
      assertError(blocked, 409, 'CONFLICT');
      assert.deepEqual((blocked.body as { error: { details: { vms: string[] } } }).error.details.vms, [`${organization}-default/api`]);
      fx.kube?.delete(VM[0], VM[1], 'api', `${organization}-default`);
      const deletion = await partnerApi(server, 'DELETE', '/customers/globex?mode=immediate', { token: tokens.live });
      assert.ok([200, 202].includes(deletion.status), deletion.text);
      await settle(
        async () => fx.kube?.tryGet('v1', 'Namespace', organization),
        (namespace) => namespace === undefined,
        "the organization's namespace to go",
      );
      assert.deepEqual(fx.kube?.list(PROJECT[0], PROJECT[1]) ?? [], [], 'no Project is left');
      assert.equal(fx.keycloak?.realms.has(organization), false, 'the realm is gone');
      await settle(
        () => partnerApi(server, 'GET', '/customers/globex', { token: tokens.live }),
        (r) => r.status === 404,
        'the customer to be gone',
      );
    });
  });
}
