/**
 * ValidatingAdmissionPolicy, as kube-apiserver's admission plugin evaluates it on every write: each stored
 * ValidatingAdmissionPolicyBinding brings its policy to bear on the writes that both match, the policy's
 * matchConditions decide whether it applies, its variables are evaluated in order, and each validation that
 * is not true denies, warns or is only audited, as the binding's validationActions say. Sources:
 * k8s.io/apiserver/pkg/admission/plugin/policy/validating/{dispatcher,validator}.go,
 * .../policy/matching/matching.go, .../cel/filter.go and the Kubernetes docs page
 * reference/access-authn-authz/validating-admission-policy. Not modelled: paramKind/paramRef (`params` is
 * null), the `authorizer` variable, type checking against schemas, cost budgets, auditAnnotations.
 */

import {
  type AdmissionRule,
  groupResource,
  isExempt,
  type LabelSelector,
  namespaceOf,
  namespaceSelectorMatches,
  objectSelectorMatches,
  ruleMatches,
} from './admission-match.ts';
import { type CelProgram, compileCel } from './cel.ts';
import { errors, KubeApiError } from './errors.ts';
import type { ResourceType } from './registry.ts';
import type { AdmissionHook, AdmissionRequest, KubeObject, ObjectStore } from './store.ts';

const GROUP = 'admissionregistration.k8s.io';

/** The two kinds, cluster-scoped, as admissionregistration.k8s.io/v1 serves them. */
export const POLICY_TYPES: ResourceType[] = [
  {
    group: GROUP,
    version: 'v1',
    kind: 'ValidatingAdmissionPolicy',
    plural: 'validatingadmissionpolicies',
    namespaced: false,
    statusSubresource: true,
  },
  { group: GROUP, version: 'v1', kind: 'ValidatingAdmissionPolicyBinding', plural: 'validatingadmissionpolicybindings', namespaced: false },
];

interface MatchResources {
  namespaceSelector?: LabelSelector;
  objectSelector?: LabelSelector;
  resourceRules?: AdmissionRule[];
  excludeResourceRules?: AdmissionRule[];
}

interface Validation {
  expression: string;
  message?: string;
  messageExpression?: string;
  reason?: string;
}

interface PolicySpec {
  failurePolicy?: 'Fail' | 'Ignore';
  matchConstraints?: MatchResources;
  matchConditions?: Array<{ name: string; expression: string }>;
  variables?: Array<{ name: string; expression: string }>;
  validations?: Validation[];
}

interface BindingSpec {
  policyName?: string;
  validationActions?: Array<'Deny' | 'Warn' | 'Audit'>;
  matchResources?: MatchResources;
}

interface Decision {
  message: string;
  reason: string;
}

/** metav1.StatusReason to its HTTP code, as the plugin's reasonToCode maps it (422 for anything else). */
function reasonToCode(reason: string): number {
  return { Forbidden: 403, Unauthorized: 401, RequestEntityTooLarge: 413 }[reason] ?? 422;
}

/** matching.Matcher: selectors, then excludeResourceRules, then resourceRules (none means every resource). */
function matches(store: ObjectStore, resources: MatchResources | undefined, request: AdmissionRequest): boolean {
  if (!resources) return true;
  if (!namespaceSelectorMatches(store, resources.namespaceSelector, request)) return false;
  if (!objectSelectorMatches(resources.objectSelector, request)) return false;
  if ((resources.excludeResourceRules ?? []).some((rule) => ruleMatches(rule, request))) return false;
  const rules = resources.resourceRules ?? [];
  return rules.length === 0 || rules.some((rule) => ruleMatches(rule, request));
}

/** The `request` variable: admission.k8s.io/v1 AdmissionRequest, empty fields left out as they are in JSON. */
function requestVariable(request: AdmissionRequest): Record<string, unknown> {
  const { type } = request;
  const kind = { group: type.group, version: type.version, kind: type.kind };
  const resource = { group: type.group, version: type.version, resource: type.plural };
  return {
    kind,
    resource,
    requestKind: kind,
    requestResource: resource,
    ...(request.subresource ? { subResource: request.subresource, requestSubResource: request.subresource } : {}),
    name: request.name,
    ...(request.namespace ? { namespace: request.namespace } : {}),
    operation: request.operation,
    userInfo: { username: request.user.username, groups: request.user.groups },
    dryRun: request.dryRun,
  };
}

/** cel.CreateNamespaceObject: the namespace's metadata, spec and status. */
function namespaceVariable(namespace: KubeObject | undefined): unknown {
  if (!namespace) return null;
  const { name, generateName, uid, labels, annotations, creationTimestamp, deletionTimestamp } = namespace.metadata;
  const metadata = Object.fromEntries(
    Object.entries({ name, generateName, uid, labels, annotations, creationTimestamp, deletionTimestamp }).filter(
      ([, v]) => v !== undefined,
    ),
  );
  return { metadata, spec: namespace.spec ?? {}, status: namespace.status ?? {} };
}

/** The evaluator of the stored policies and bindings, installed as an admission hook. */
export class AdmissionPolicies {
  readonly #store: ObjectStore;

  constructor(store: ObjectStore) {
    this.#store = store;
  }

  /** The compiled expression (cel.ts caches them), or the reason it does not compile. */
  #program(expression: string): CelProgram | string {
    try {
      return compileCel(expression);
    } catch (error) {
      return `compilation failed: ${(error as Error).message}`;
    }
  }

  /** One expression's value, or its error as filter.go words it. */
  #evaluate(expression: string, bindings: Record<string, unknown>): { ok: true; value: unknown } | { ok: false; error: string } {
    const program = this.#program(expression);
    if (typeof program === 'string') return { ok: false, error: program };
    const outcome = program.evaluate(bindings);
    return outcome.ok ? outcome : { ok: false, error: `expression '${expression}' resulted in error: ${outcome.error}` };
  }

  #list(kind: string): KubeObject[] {
    const type = this.#store.registry.findByKind(`${GROUP}/v1`, kind);
    return type ? this.#store.list(type, undefined).items : [];
  }

  /**
   * What one policy decides of a request: nothing (it does not apply, or every validation holds), or the
   * failed validations and expression errors (under failurePolicy Fail), in order.
   */
  #validate(spec: PolicySpec, request: AdmissionRequest): Decision[] {
    const fail = spec.failurePolicy !== 'Ignore';
    const bindings: Record<string, unknown> = {
      object: request.operation === 'DELETE' ? null : (request.object ?? null),
      oldObject: request.operation === 'CREATE' ? null : (request.oldObject ?? null),
      request: requestVariable(request),
      namespaceObject: namespaceVariable(namespaceOf(this.#store, request)),
      params: null,
    };
    // matchConditions: any false skips the policy, even when another errs; otherwise an error is a failure.
    const conditionErrors: string[] = [];
    for (const condition of spec.matchConditions ?? []) {
      const outcome = this.#evaluate(condition.expression, { ...bindings, variables: {} });
      if (!outcome.ok) conditionErrors.push(outcome.error);
      else if (outcome.value !== true) return [];
    }
    if (conditionErrors.length > 0) return fail ? [{ message: aggregate(conditionErrors), reason: 'Invalid' }] : [];
    // Variables are lazy on a cluster: one that errs fails only the expressions that use it.
    const values: Record<string, unknown> = {};
    const failed = new Map<string, string>();
    /** An expression that reads a variable that erred errs with that variable's error, as a lazy read would. */
    const run = (expression: string, scope: Record<string, unknown>) => {
      const broken = [...failed.entries()].find(([name]) => new RegExp(`\\bvariables\\.${name}\\b`).test(expression));
      return broken ? ({ ok: false, error: broken[1] } as const) : this.#evaluate(expression, scope);
    };
    for (const variable of spec.variables ?? []) {
      const outcome = run(variable.expression, { ...bindings, variables: values });
      if (outcome.ok) values[variable.name] = outcome.value;
      else failed.set(variable.name, outcome.error);
    }
    const scope = { ...bindings, variables: values };
    const decisions: Decision[] = [];
    for (const validation of spec.validations ?? []) {
      const outcome = run(validation.expression, scope);
      if (!outcome.ok) {
        if (fail) decisions.push({ message: outcome.error, reason: 'Invalid' });
        continue;
      }
      if (outcome.value === true) continue;
      decisions.push({ message: this.#message(validation, scope), reason: validation.reason || 'Invalid' });
    }
    return decisions;
  }

  /** validator.go: messageExpression if it gives a one-line string, else message, else `failed expression: ...`. */
  #message(validation: Validation, scope: Record<string, unknown>): string {
    if (validation.messageExpression) {
      const outcome = this.#evaluate(validation.messageExpression, scope);
      if (outcome.ok && typeof outcome.value === 'string') {
        const text = outcome.value.trim();
        if (text !== '' && !text.includes('\n') && text.length <= 5120) return text;
      }
    }
    if (validation.message?.trim()) return validation.message.trim();
    return `failed expression: ${validation.expression.trim()}`;
  }

  /** Evaluates every binding on a write; warnings go to the request, the first denial is thrown. */
  readonly hook: AdmissionHook = (request) => {
    if (isExempt(request)) return;
    const policies = new Map(this.#list('ValidatingAdmissionPolicy').map((p) => [p.metadata.name ?? '', p]));
    const bindings = this.#list('ValidatingAdmissionPolicyBinding').sort((a, b) =>
      (a.metadata.name ?? '').localeCompare(b.metadata.name ?? ''),
    );
    let denial: KubeApiError | undefined;
    for (const binding of bindings) {
      const bindingSpec = (binding.spec ?? {}) as BindingSpec;
      const policy = policies.get(bindingSpec.policyName ?? '');
      if (!policy) continue;
      const spec = (policy.spec ?? {}) as PolicySpec;
      if (!matches(this.#store, spec.matchConstraints, request) || !matches(this.#store, bindingSpec.matchResources, request)) continue;
      const actions = bindingSpec.validationActions ?? [];
      for (const decision of this.#validate(spec, request)) {
        const policyName = policy.metadata.name ?? '';
        const bindingName = binding.metadata.name ?? '';
        if (actions.includes('Warn'))
          request.warnings?.push(
            `Validation failed for ValidatingAdmissionPolicy '${policyName}' with binding '${bindingName}': ${decision.message}`,
          );
        if (actions.includes('Deny') && !denial) denial = denied(request, policyName, bindingName, decision);
      }
    }
    if (denial) throw denial;
  };

  /** Refuses a policy whose expressions do not parse, as the API's validation of the kind does (422). */
  readonly validatePolicies: AdmissionHook = (request) => {
    if (request.type.group !== GROUP || request.type.kind !== 'ValidatingAdmissionPolicy' || !request.object) return;
    const spec = (request.object.spec ?? {}) as PolicySpec;
    const fields: Array<[string, string | undefined]> = [
      ...(spec.matchConditions ?? []).map((c, i) => [`spec.matchConditions[${i}].expression`, c.expression] as [string, string]),
      ...(spec.variables ?? []).map((v, i) => [`spec.variables[${i}].expression`, v.expression] as [string, string]),
      ...(spec.validations ?? []).flatMap((v, i) => [
        [`spec.validations[${i}].expression`, v.expression] as [string, string],
        [`spec.validations[${i}].messageExpression`, v.messageExpression] as [string, string | undefined],
      ]),
    ];
    for (const [field, expression] of fields) {
      if (expression === undefined) continue;
      const problem = this.#program(expression);
      if (typeof problem === 'string')
        throw errors.invalid(
          `ValidatingAdmissionPolicy.${GROUP}`,
          request.name,
          field,
          `Invalid value: ${JSON.stringify(expression)}: ${problem}`,
        );
    }
  };
}

/** utilerrors.NewAggregate's text: one error as itself, several in brackets. */
function aggregate(messages: string[]): string {
  const unique = [...new Set(messages)];
  return unique.length === 1 ? (unique[0] ?? '') : `[${unique.join(', ')}]`;
}

/**
 * The denial: admission.NewForbidden's `<resource>.<group> "<name>" is forbidden: ValidatingAdmissionPolicy
 * '<policy>' with binding '<binding>' denied request: <message>`, with the validation's reason (Invalid,
 * 422, unless it says otherwise) and the message again as the one cause.
 */
export function denied(request: AdmissionRequest, policy: string, binding: string, decision: Decision): KubeApiError {
  const message = `ValidatingAdmissionPolicy '${policy}' with binding '${binding}' denied request: ${decision.message}`;
  const name = request.name || (request.object?.metadata.generateName ?? '') || 'Unknown';
  return new KubeApiError(
    reasonToCode(decision.reason),
    decision.reason,
    `${groupResource(request)} ${JSON.stringify(name)} is forbidden: ${message}`,
    {
      name,
      ...(request.type.group ? { group: request.type.group } : {}),
      kind: request.type.plural,
      causes: [{ message }],
    },
  );
}

/** Registers the two kinds when the registry lacks them and adds the engine to the store's admission. */
export function installAdmissionPolicies(store: ObjectStore): AdmissionPolicies {
  for (const type of POLICY_TYPES) if (!store.registry.find(type.group, type.version, type.plural)) store.registry.register(type);
  const engine = new AdmissionPolicies(store);
  store.admission.push(engine.validatePolicies, engine.hook);
  return engine;
}
