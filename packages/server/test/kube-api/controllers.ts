import { randomUUID } from 'node:crypto';
import type { Change, KubeObject, ObjectStore } from './store.ts';

/**
 * Controller doubles (README "Controllers"): what the Job controller plus a kubelet, and the Deployment
 * controller, would do to an object's status, so that a client waiting on them sees what it would see on a
 * cluster. They run only when a suite starts them (`kube.runJobs`, `kube.runDeployments`).
 */

type Obj = Record<string, unknown>;

const stamp = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

/** What the container of a pod did: exited (with its termination message), or is still waiting. */
export type PodOutcome = { exitCode: number; message?: string } | { waiting: string; message?: string };

/** Decides how a pod "runs": a suite can run real code here (a script, against files of its own). */
export type PodRunner = (pod: KubeObject) => PodOutcome | Promise<PodOutcome>;

function spec(object: KubeObject): Obj {
  return (object.spec ?? {}) as Obj;
}

/**
 * Jobs: each new Job gets a pod (labels `batch.kubernetes.io/job-name`, `job-name`, controller-uid, an owner
 * reference), the runner decides the container's outcome, and pod and Job status follow it: Running, then
 * Succeeded/Failed with the container's exit code and termination message; the Job counts them, makes a new
 * pod after a failure while `backoffLimit` allows, and ends with a Complete or Failed condition.
 */
export class JobController {
  readonly #store: ObjectStore;
  readonly #runner: PodRunner;
  readonly #unsubscribe: () => void;
  /** Pods it made, by Job key (`namespace/name`), in order. */
  readonly pods = new Map<string, string[]>();
  #stopped = false;

  constructor(store: ObjectStore, runner: PodRunner) {
    this.#store = store;
    this.#runner = runner;
    this.#unsubscribe = store.subscribe((change) => this.#onChange(change));
  }

  stop(): void {
    this.#stopped = true;
    this.#unsubscribe();
  }

  #onChange(change: Change): void {
    if (change.type !== 'ADDED' || change.resource.group !== 'batch' || change.resource.kind !== 'Job') return;
    // Listeners run inside the store's write: work starts once that write has returned.
    setImmediate(() => void this.#run(change.object).catch(() => undefined));
  }

  #type(apiVersion: string, kind: string) {
    return this.#store.typeOf({ apiVersion, kind });
  }

  async #run(job: KubeObject): Promise<void> {
    const namespace = job.metadata.namespace ?? 'default';
    const name = job.metadata.name ?? '';
    const jobType = this.#type('batch/v1', 'Job');
    const backoffLimit = typeof spec(job).backoffLimit === 'number' ? (spec(job).backoffLimit as number) : 6;
    let failed = 0;
    this.#jobStatus(namespace, name, { startTime: stamp(), active: 1 });
    for (;;) {
      if (this.#stopped || !this.#exists(jobType, namespace, name)) return;
      const pod = this.#createPod(job);
      const outcome = await this.#runner(pod);
      if (this.#stopped || !this.#exists(jobType, namespace, name)) return;
      const podName = pod.metadata.name ?? '';
      if ('waiting' in outcome) {
        this.#podStatus(namespace, podName, {
          phase: 'Pending',
          containerStatuses: [this.#container(pod, { waiting: { reason: outcome.waiting, message: outcome.message ?? '' } })],
        });
        return;
      }
      const succeeded = outcome.exitCode === 0;
      this.#podStatus(namespace, podName, {
        phase: succeeded ? 'Succeeded' : 'Failed',
        containerStatuses: [
          this.#container(pod, {
            terminated: {
              exitCode: outcome.exitCode,
              reason: succeeded ? 'Completed' : 'Error',
              message: outcome.message ?? '',
              finishedAt: stamp(),
            },
          }),
        ],
      });
      if (succeeded) {
        this.#jobStatus(namespace, name, {
          active: 0,
          succeeded: 1,
          failed,
          completionTime: stamp(),
          conditions: [{ type: 'Complete', status: 'True', lastTransitionTime: stamp() }],
        });
        return;
      }
      failed += 1;
      if (failed > backoffLimit) {
        this.#jobStatus(namespace, name, {
          active: 0,
          failed,
          conditions: [
            {
              type: 'Failed',
              status: 'True',
              reason: 'BackoffLimitExceeded',
              message: 'Job has reached the specified backoff limit',
              lastTransitionTime: stamp(),
            },
          ],
        });
        return;
      }
      this.#jobStatus(namespace, name, { active: 1, failed });
    }
  }

  #exists(type: ReturnType<ObjectStore['typeOf']>, namespace: string, name: string): boolean {
    try {
      this.#store.get(type, namespace, name);
      return true;
    } catch {
      return false;
    }
  }

  #container(pod: KubeObject, state: Obj): Obj {
    const first = ((spec(pod).containers as Obj[] | undefined) ?? [])[0] ?? {};
    return { name: first.name ?? 'main', image: first.image ?? '', ready: false, restartCount: 0, state };
  }

  #createPod(job: KubeObject): KubeObject {
    const namespace = job.metadata.namespace ?? 'default';
    const name = job.metadata.name ?? '';
    const uid = job.metadata.uid ?? '';
    const template = (spec(job).template ?? {}) as { metadata?: Obj; spec?: Obj };
    const labels = {
      ...((template.metadata?.labels as Record<string, string> | undefined) ?? {}),
      'batch.kubernetes.io/controller-uid': uid,
      'batch.kubernetes.io/job-name': name,
      'controller-uid': uid,
      'job-name': name,
    };
    const pod = this.#store.create(this.#type('v1', 'Pod'), namespace, {
      metadata: {
        name: `${name.slice(0, 57)}-${randomUUID().replaceAll('-', '').slice(0, 5)}`,
        namespace,
        labels,
        annotations: (template.metadata?.annotations as Record<string, string> | undefined) ?? {},
        ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name, uid, controller: true, blockOwnerDeletion: true }],
      },
      spec: structuredClone(template.spec ?? {}),
    });
    const list = this.pods.get(`${namespace}/${name}`) ?? [];
    list.push(pod.metadata.name ?? '');
    this.pods.set(`${namespace}/${name}`, list);
    this.#podStatus(namespace, pod.metadata.name ?? '', { phase: 'Running', startTime: stamp() });
    return this.#store.get(this.#type('v1', 'Pod'), namespace, pod.metadata.name ?? '');
  }

  #podStatus(namespace: string, name: string, status: Obj): void {
    const type = this.#type('v1', 'Pod');
    try {
      const pod = this.#store.get(type, namespace, name);
      this.#store.update(type, namespace, name, { ...pod, status: { ...((pod.status as Obj) ?? {}), ...status } }, 'status');
    } catch {
      // The pod went with its Job.
    }
  }

  #jobStatus(namespace: string, name: string, status: Obj): void {
    const type = this.#type('batch/v1', 'Job');
    try {
      const job = this.#store.get(type, namespace, name);
      this.#store.update(type, namespace, name, { ...job, status: { ...((job.status as Obj) ?? {}), ...status } }, 'status');
    } catch {
      // Deleted meanwhile.
    }
  }
}

/**
 * Deployments: whenever a Deployment's generation moves past its `status.observedGeneration`, a rollout
 * replaces its replicas one at a time (`stepMs` apart), reporting `observedGeneration`, `updatedReplicas`,
 * `readyReplicas`, `availableReplicas` and the Available/Progressing conditions as the Deployment controller
 * does. `hold` freezes a rollout before its first new replica; `fail` ends it with ProgressDeadlineExceeded.
 */
export class DeploymentController {
  readonly #store: ObjectStore;
  readonly #stepMs: number;
  readonly #unsubscribe: () => void;
  readonly #held = new Set<string>();
  readonly #failing = new Set<string>();
  /** The generation each Deployment is rolling out to (a newer one abandons an older rollout). */
  readonly #target = new Map<string, number>();
  /** Completed rollouts, by `namespace/name`, with the generation each reached. */
  readonly completed: Array<{ key: string; generation: number }> = [];

  constructor(store: ObjectStore, options: { stepMs?: number } = {}) {
    this.#store = store;
    this.#stepMs = options.stepMs ?? 5;
    this.#unsubscribe = store.subscribe((change) => this.#onChange(change));
  }

  stop(): void {
    this.#unsubscribe();
    this.#target.clear();
  }

  hold(namespace: string, name: string): void {
    this.#held.add(`${namespace}/${name}`);
  }

  fail(namespace: string, name: string): void {
    this.#failing.add(`${namespace}/${name}`);
  }

  #onChange(change: Change): void {
    if (change.type === 'DELETED' || change.resource.group !== 'apps' || change.resource.kind !== 'Deployment') return;
    const object = change.object;
    const generation = object.metadata.generation ?? 1;
    const observed = ((object.status as Obj | undefined)?.observedGeneration as number | undefined) ?? 0;
    const key = `${object.metadata.namespace}/${object.metadata.name}`;
    if (observed >= generation || (this.#target.get(key) ?? 0) >= generation) return;
    this.#target.set(key, generation);
    setImmediate(() => void this.#rollout(key, object.metadata.namespace ?? '', object.metadata.name ?? '', generation));
  }

  async #rollout(key: string, namespace: string, name: string, generation: number): Promise<void> {
    const type = this.#store.typeOf({ apiVersion: 'apps/v1', kind: 'Deployment' });
    const current = () => {
      try {
        return this.#target.get(key) === generation ? this.#store.get(type, namespace, name) : undefined;
      } catch {
        return undefined;
      }
    };
    const write = (status: Obj) => {
      const deployment = current();
      if (deployment) this.#store.update(type, namespace, name, { ...deployment, status }, 'status');
    };
    const start = current();
    if (!start) return;
    const desired = typeof spec(start).replicas === 'number' ? (spec(start).replicas as number) : 1;
    const progressing = (status: string, reason: string) => ({ type: 'Progressing', status, reason, lastUpdateTime: stamp() });
    const available = (status: string) => ({ type: 'Available', status, reason: 'MinimumReplicasAvailable', lastUpdateTime: stamp() });
    const base = { observedGeneration: generation, replicas: desired };
    write({ ...base, updatedReplicas: 0, readyReplicas: desired, availableReplicas: desired, conditions: [available('True')] });
    if (this.#failing.has(key)) {
      write({
        ...base,
        updatedReplicas: 0,
        readyReplicas: desired,
        availableReplicas: desired,
        conditions: [available('True'), progressing('False', 'ProgressDeadlineExceeded')],
      });
      return;
    }
    if (this.#held.has(key)) return;
    for (let updated = 1; updated <= desired; updated++) {
      await new Promise((resolve) => setTimeout(resolve, this.#stepMs));
      if (!current()) return;
      write({
        ...base,
        replicas: updated === desired ? desired : desired + 1,
        updatedReplicas: updated,
        readyReplicas: desired,
        availableReplicas: desired,
        conditions: [available('True'), progressing('True', updated === desired ? 'NewReplicaSetAvailable' : 'ReplicaSetUpdated')],
      });
    }
    if (current()) this.completed.push({ key, generation });
  }
}
