import { parse as parseYaml } from 'yaml';
import type { KubeApi } from './index.ts';
import { condition, installKubeDc } from './kube-dc.ts';
import { ensureBackingNamespace, limitRangeOf, PLAN_LIMITS, type PlanDefinition, upsertSpec } from './kube-dc-plans.ts';
import { reconcileDatabase, reconcileVirtualMachine, type WorkloadsReconciler } from './kube-dc-workloads.ts';
import type { Change, KubeObject } from './store.ts';

const ORG = ['kube-dc.com/v1', 'Organization'] as const;
const PROJECT = ['kube-dc.com/v1', 'Project'] as const;
const _VM = ['kubevirt.io/v1', 'VirtualMachine'] as const;
const _DATABASE = ['db.kube-dc.com/v1alpha1', 'KdcDatabase'] as const;
const CNPG = ['postgresql.cnpg.io/v1', 'Cluster'] as const;
const HRQ = ['hnc.x-k8s.io/v1alpha2', 'HierarchicalResourceQuota'] as const;
export const ORGANIZATION_FINALIZER = 'kube-dc.com/organization';
export { PLAN_LIMITS } from './kube-dc-plans.ts';
export const PROJECT_FINALIZER = 'kube-dc.com/project';

/** What the controller asks of the identity provider: Kube-DC's Organization controller makes each realm. */
export interface RealmProvisioner {
  provisionOrganizationRealm(organization: string, spec: { email: string }): { url: string; user: string; password: string };
  deleteOrganizationRealm(organization: string): boolean;
}

export interface KubeDcControllerOptions {
  /** false: nothing is reconciled until `step()` or `resume()` (deterministic tests). Default true. */
  running?: boolean;
  /** While running: how long after a change the controller acts (a real controller takes seconds). Default 0. */
  reconcileDelayMs?: number;
  /** Whether `egressNetworkType: public` is allowed (Kube-DC's allow_public_projects, off by default). */
  allowPublicProjects?: boolean;
  /** The identity provider's double; without it, Organizations get no realm (suites that do not need one). */
  keycloak?: RealmProvisioner;
  /** Kube-DC's MasterConfig.OrganizationProjectsLimit (default 50): a Project past it reports `LimitCheck` False. */
  projectsLimit?: number;
  now?: () => Date;
}

/**
 * A controller double that moves Kube-DC objects the way Kube-DC's controllers do (docs/platform/
 * architecture-multi-tenancy.md, billing-plans-configuration.md), on the double's store:
 * - Organization: takes the `kube-dc.com/organization` finalizer; must live in the namespace of its own
 *   name; `status.ready` and a `Ready` condition; a `billing.kube-dc.com/plan-id` annotation with
 *   subscription `active` derives the `plan-quota` HierarchicalResourceQuota from the `billing-plans`
 *   ConfigMap. Deleted only once no Project is left in its namespace.
 * - Project: takes `kube-dc.com/project`; waits for a ready Organization; checks `cidrBlock` and the
 *   egress type; creates the backing namespace `{organization}-{project}` and reports it in
 *   `status.namespace`. Deletion deletes the backing namespace and lets go once it is gone.
 * - VirtualMachine (KubeVirt): `spec.runStrategy` (or `spec.running`) gives `status.printableStatus` and
 *   `status.ready`.
 * - KdcDatabase: a postgresql database gets its CloudNativePG Cluster of the same name; the database's
 *   `status.readyInstances` is 0 while that Cluster carries `cnpg.io/hibernation: "on"`.
 * Work is queued on every change and done on a later tick, so a client sees the in-between states.
 */
export class KubeDcController {
  readonly #kube: KubeApi;
  readonly #queue = new Map<string, { kind: string; namespace: string | undefined; name: string }>();
  readonly #failures = new Map<string, string>();
  readonly #unsubscribe: () => void;
  readonly #now: () => Date;
  readonly #allowPublic: boolean;
  readonly #keycloak: RealmProvisioner | undefined;
  /** Kube-DC's OrganizationProjectsLimit; a test may lower it. */
  projectsLimit: number;
  #running: boolean;
  readonly #delayMs: number;
  #scheduled = false;
  /** Reconciliations done, for tests that count work. */
  reconciled = 0;

  constructor(kube: KubeApi, options: KubeDcControllerOptions = {}) {
    this.#kube = kube;
    this.#now = options.now ?? (() => new Date());
    this.#allowPublic = options.allowPublicProjects ?? false;
    this.#keycloak = options.keycloak;
    this.projectsLimit = options.projectsLimit ?? 50;
    this.#running = options.running ?? true;
    this.#delayMs = options.reconcileDelayMs ?? 0;
    installKubeDc(kube);
    // CDI's DataVolume (a VM's disk, as Kube-DC's wizard makes it): its CRD is not vendored, so it stays permissive.
    if (!kube.registry.findByKind('cdi.kubevirt.io/v1beta1', 'DataVolume'))
      kube.registerResource({
        group: 'cdi.kubevirt.io',
        version: 'v1beta1',
        kind: 'DataVolume',
        plural: 'datavolumes',
        namespaced: true,
        statusSubresource: true,
      });
    if (!kube.registry.findByKind(CNPG[0], CNPG[1]))
      kube.registerResource({
        group: 'postgresql.cnpg.io',
        version: 'v1',
        kind: 'Cluster',
        plural: 'clusters',
        namespaced: true,
        statusSubresource: true,
      });
    this.#unsubscribe = kube.store.subscribe((change) => this.#onChange(change));
  }

  /** Makes the next reconciliations of `kind/namespace/name` fail with `message` (the Ready condition says so). */
  fail(kind: 'Organization' | 'Project', namespace: string, name: string, message: string): void {
    this.#failures.set(`${kind}/${namespace}/${name}`, message);
    this.#enqueue(kind, namespace, name);
  }

  heal(kind: 'Organization' | 'Project', namespace: string, name: string): void {
    this.#failures.delete(`${kind}/${namespace}/${name}`);
    this.#enqueue(kind, namespace, name);
  }

  pause(): void {
    this.#running = false;
  }

  resume(): void {
    this.#running = true;
    this.#schedule();
  }

  /** Reconciles everything queued, until nothing is left (changes it makes queue more work). */
  step(): void {
    for (let round = 0; round < 50 && this.#queue.size > 0; round += 1) {
      const items = [...this.#queue.values()];
      this.#queue.clear();
      for (const item of items) this.#reconcile(item.kind, item.namespace, item.name);
    }
  }

  close(): void {
    this.#unsubscribe();
    this.#running = false;
  }

  #onChange(change: Change): void {
    const { kind } = change.resource;
    const meta = change.object.metadata;
    if (['Organization', 'Project', 'VirtualMachine', 'KdcDatabase'].includes(kind)) this.#enqueue(kind, meta.namespace, meta.name ?? '');
    // A Project waits on its Organization, an Organization's deletion on its Projects, a database on its Cluster.
    if (kind === 'Organization')
      for (const p of this.#kube.list(...PROJECT, meta.namespace)) this.#enqueue('Project', p.metadata.namespace, p.metadata.name ?? '');
    if (kind === 'Project' && meta.namespace) this.#enqueue('Organization', meta.namespace, meta.namespace);
    if (kind === 'Namespace')
      for (const p of this.#kube.list(...PROJECT)) this.#enqueue('Project', p.metadata.namespace, p.metadata.name ?? '');
    if (kind === 'Cluster' && change.resource.group === 'postgresql.cnpg.io') this.#enqueue('KdcDatabase', meta.namespace, meta.name ?? '');
    if (kind === 'ConfigMap' && meta.name === 'billing-plans')
      for (const o of this.#kube.list(...ORG)) this.#enqueue('Organization', o.metadata.namespace, o.metadata.name ?? '');
  }

  #enqueue(kind: string, namespace: string | undefined, name: string): void {
    this.#queue.set(`${kind}/${namespace ?? ''}/${name}`, { kind, namespace, name });
    this.#schedule();
  }

  #schedule(): void {
    if (!this.#running || this.#scheduled) return;
    this.#scheduled = true;
    const act = () => {
      this.#scheduled = false;
      if (this.#running) this.step();
    };
    if (this.#delayMs > 0) setTimeout(act, this.#delayMs).unref();
    else setImmediate(act);
  }

  #reconcile(kind: string, namespace: string | undefined, name: string): void {
    this.reconciled += 1;
    try {
      if (kind === 'Organization') this.#organization(namespace ?? '', name);
      else if (kind === 'Project') this.#project(namespace ?? '', name);
      else if (kind === 'VirtualMachine') reconcileVirtualMachine(this.#workloads(), namespace ?? '', name);
      else if (kind === 'KdcDatabase') reconcileDatabase(this.#workloads(), namespace ?? '', name);
    } catch (error) {
      // A write lost to a concurrent one: the change it caused queues the object again.
      if ((error as { code?: number }).code !== 409 && (error as { code?: number }).code !== 404) throw error;
    }
  }

  #workloads(): WorkloadsReconciler {
    return { kube: this.#kube, now: this.#now, setStatus: (kind, object, status) => this.#setStatus(kind, object, status) };
  }

  #setStatus(kind: readonly [string, string], object: KubeObject, status: Record<string, unknown>): void {
    const current = (object.status ?? {}) as Record<string, unknown>;
    const conditions = status.conditions as Array<Record<string, unknown>> | undefined;
    const before = (current.conditions as Array<Record<string, unknown>> | undefined)?.[0];
    // lastTransitionTime moves only when the status does, as metav1 conditions require.
    if (conditions?.[0] && before && before.status === conditions[0].status && before.reason === conditions[0].reason)
      conditions[0].lastTransitionTime = before.lastTransitionTime;
    this.#kube.patch(
      kind[0],
      kind[1],
      object.metadata.name ?? '',
      object.metadata.namespace,
      { status: { ...current, ...status } },
      'status',
    );
  }

  #ensureFinalizer(kind: readonly [string, string], object: KubeObject, finalizer: string): void {
    if (object.metadata.finalizers?.includes(finalizer)) return;
    this.#kube.patch(kind[0], kind[1], object.metadata.name ?? '', object.metadata.namespace, {
      metadata: { finalizers: [...(object.metadata.finalizers ?? []), finalizer] },
    });
  }

  #dropFinalizer(kind: readonly [string, string], object: KubeObject, finalizer: string): void {
    const rest = (object.metadata.finalizers ?? []).filter((f) => f !== finalizer);
    this.#kube.patch(kind[0], kind[1], object.metadata.name ?? '', object.metadata.namespace, { metadata: { finalizers: rest } });
  }

  #organization(namespace: string, name: string): void {
    const org = this.#kube.tryGet(...ORG, name, namespace);
    if (!org) return;
    const generation = org.metadata.generation ?? 1;
    const at = this.#now();
    if (org.metadata.deletionTimestamp) {
      const projects = this.#kube.list(...PROJECT, namespace);
      if (projects.length > 0) {
        this.#setStatus(ORG, org, {
          ready: false,
          conditions: [condition('False', 'Deleting', `waiting for ${projects.length} project(s) to be deleted`, generation, at)],
        });
        return;
      }
      const quota = this.#kube.tryGet(...HRQ, 'plan-quota', namespace);
      if (quota) this.#kube.delete(...HRQ, 'plan-quota', namespace);
      if (this.#kube.tryGet('v1', 'LimitRange', PLAN_LIMITS, namespace)) this.#kube.delete('v1', 'LimitRange', PLAN_LIMITS, namespace);
      // Not shown in Kube-DC's public source: the double assumes the controller removes the realm it made.
      this.#keycloak?.deleteOrganizationRealm(name);
      if (this.#kube.tryGet('v1', 'Secret', 'realm-access', namespace)) this.#kube.delete('v1', 'Secret', 'realm-access', namespace);
      this.#dropFinalizer(ORG, org, ORGANIZATION_FINALIZER);
      return;
    }
    this.#ensureFinalizer(ORG, org, ORGANIZATION_FINALIZER);
    const failure = this.#failures.get(`Organization/${namespace}/${name}`);
    if (failure) {
      this.#setStatus(ORG, org, { ready: false, conditions: [condition('False', 'ReconcileError', failure, generation, at)] });
      return;
    }
    if (namespace !== name) {
      const message = `an Organization must live in the namespace of its own name (${name})`;
      this.#setStatus(ORG, org, { ready: false, conditions: [condition('False', 'InvalidNamespace', message, generation, at)] });
      return;
    }
    if (!this.#realm(org)) {
      const message = 'the identity realm could not be set up: a user has the Organization email';
      this.#setStatus(ORG, org, { ready: false, conditions: [condition('False', 'RealmError', message, generation, at)] });
      return;
    }
    this.#planQuota(org);
    this.#setStatus(ORG, org, { ready: true, conditions: [condition('True', 'Reconciled', 'organization is ready', generation, at)] });
  }

  /**
   * The realm Kube-DC's Organization controller makes (tests/e2e/organization_test.go): realm, client
   * `kube-dc`, groups `org-admin` and `user`, user `admin` with `spec.email`, and the `realm-access`
   * Secret holding its credentials. False when the realm refused the admin (its email taken).
   */
  #realm(org: KubeObject): boolean {
    if (!this.#keycloak) return true;
    const name = org.metadata.name ?? '';
    const email = String((org.spec as { email?: string } | undefined)?.email ?? '');
    let access: { url: string; user: string; password: string };
    try {
      access = this.#keycloak.provisionOrganizationRealm(name, { email });
    } catch {
      return false;
    }
    if (!this.#kube.tryGet('v1', 'Secret', 'realm-access', name)) {
      const data = Object.fromEntries(Object.entries(access).map(([key, value]) => [key, Buffer.from(value).toString('base64')]));
      this.#kube.create({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'realm-access', namespace: name }, type: 'Opaque', data });
    }
    return true;
  }

  /**
   * The `plan-quota` HRQ and the `default-resource-limits` LimitRange the billing controller derives from
   * the plan (base requests only: the double skips overheads); none without a plan annotation.
   */
  #planQuota(org: KubeObject): void {
    const annotations = org.metadata.annotations ?? {};
    const planId = annotations['billing.kube-dc.com/plan-id'];
    const namespace = org.metadata.namespace ?? '';
    const existing = this.#kube.tryGet(...HRQ, 'plan-quota', namespace);
    const config = this.#kube.tryGet('v1', 'ConfigMap', 'billing-plans', 'kube-dc');
    const plans = config
      ? (parseYaml(String((config.data as Record<string, string>)?.['plans.yaml'] ?? '')) as {
          plans?: Record<string, PlanDefinition>;
        })
      : undefined;
    const plan = planId ? plans?.plans?.[planId] : undefined;
    if (!plan || annotations['billing.kube-dc.com/subscription'] !== 'active') {
      if (existing && !planId) this.#kube.delete(...HRQ, 'plan-quota', namespace);
      return;
    }
    const labels = { 'billing.kube-dc.com/auto-managed': 'true', 'billing.kube-dc.com/plan-id': planId ?? '' };
    const hard: Record<string, string> = {};
    for (const [resource, value] of Object.entries(plan.requests ?? {})) hard[`requests.${resource}`] = String(value);
    if (plan.pods !== undefined) hard.pods = String(plan.pods);
    const body = { apiVersion: HRQ[0], kind: HRQ[1], metadata: { name: 'plan-quota', namespace, labels }, spec: { hard } };
    if (!existing) this.#kube.create(body);
    else this.#kube.patch(...HRQ, 'plan-quota', namespace, { metadata: body.metadata, spec: body.spec });
    if (plan.limitRange) upsertSpec(this.#kube, 'LimitRange', PLAN_LIMITS, namespace, labels, { limits: limitRangeOf(plan.limitRange) });
  }

  #project(namespace: string, name: string): void {
    const project = this.#kube.tryGet(...PROJECT, name, namespace);
    if (!project) return;
    const generation = project.metadata.generation ?? 1;
    const at = this.#now();
    const backing = `${namespace}-${name}`;
    const spec = (project.spec ?? {}) as { cidrBlock?: string; egressNetworkType?: string };
    if (project.metadata.deletionTimestamp) {
      const ns = this.#kube.tryGet('v1', 'Namespace', backing);
      if (ns) {
        if (!ns.metadata.deletionTimestamp) this.#kube.delete('v1', 'Namespace', backing);
        if (this.#kube.tryGet('v1', 'Namespace', backing)) {
          this.#setStatus(PROJECT, project, {
            ready: false,
            conditions: [condition('False', 'Deleting', `deleting namespace ${backing}`, generation, at)],
          });
          return;
        }
      }
      this.#dropFinalizer(PROJECT, project, PROJECT_FINALIZER);
      return;
    }
    this.#ensureFinalizer(PROJECT, project, PROJECT_FINALIZER);
    const fail = (reason: string, message: string) =>
      this.#setStatus(PROJECT, project, { ready: false, conditions: [condition('False', reason, message, generation, at)] });
    const failure = this.#failures.get(`Project/${namespace}/${name}`);
    if (failure) {
      fail('ReconcileError', failure);
      return;
    }
    const org = this.#kube.tryGet(...ORG, namespace, namespace);
    const problem =
      !org || (org.status as { ready?: boolean } | undefined)?.ready !== true
        ? (['OrganizationNotReady', `organization ${namespace} is not ready`] as const)
        : !spec.cidrBlock || !/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/.test(spec.cidrBlock)
          ? (['InvalidSpec', 'spec.cidrBlock must be an IPv4 CIDR'] as const)
          : spec.egressNetworkType === 'public' && !this.#allowPublic
            ? (['PublicProjectsDisabled', 'public projects are not enabled on this cluster'] as const)
            : undefined;
    if (problem) {
      fail(problem[0], problem[1]);
      return;
    }
    // Kube-DC keeps a Project past the organization's project limit and says so (docs/platform/project-resources.md).
    const older = this.#kube
      .list(...PROJECT, namespace)
      .filter((p) => !p.metadata.deletionTimestamp)
      .sort(
        (a, b) =>
          String(a.metadata.creationTimestamp).localeCompare(String(b.metadata.creationTimestamp)) ||
          String(a.metadata.name).localeCompare(String(b.metadata.name)),
      );
    if (older.findIndex((p) => p.metadata.name === name) >= this.projectsLimit) {
      const message = `organization ${namespace} has reached its limit of ${this.projectsLimit} projects`;
      this.#setStatus(PROJECT, project, {
        ready: false,
        conditions: [{ ...condition('False', 'LimitExceeded', message, generation, at), type: 'LimitCheck' }],
      });
      return;
    }
    ensureBackingNamespace(this.#kube, namespace, name, backing);
    this.#setStatus(PROJECT, project, {
      ready: true,
      namespace: backing,
      conditions: [condition('True', 'Reconciled', 'project is ready', generation, at)],
    });
  }
}
