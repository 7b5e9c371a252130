/**
 * Validating admission webhooks, in-process: a webhook is a function that gets the AdmissionRequest of every
 * write its rules and selectors match, and answers as an AdmissionResponse would. A denial, or a webhook
 * that cannot be called, is answered as kube-apiserver's ValidatingAdmissionWebhook plugin answers it
 * (k8s.io/apiserver/pkg/admission/plugin/webhook/errors/statuserror.go ToStatusErr,
 * .../webhook/validating/dispatcher.go; rules and selectors as the Kubernetes docs page
 * reference/access-authn-authz/extensible-admission-controllers describes them).
 */
import {
  type AdmissionRule,
  groupResource,
  isExempt,
  type LabelSelector,
  namespaceSelectorMatches,
  objectSelectorMatches,
  ruleMatches,
} from './admission-match.ts';
import { KubeApiError } from './errors.ts';
import type { AdmissionHook, AdmissionRequest, ObjectStore } from './store.ts';

export type { AdmissionRule, LabelSelector } from './admission-match.ts';

/** An AdmissionResponse: allowed (true), or refused with a message and the metav1.Status code and reason to use. */
export type WebhookAnswer =
  | true
  | { allowed: true; warnings?: string[] }
  | { allowed: false; message?: string; reason?: string; code?: number; warnings?: string[] };

export interface Webhook {
  /** The webhook's name in its ValidatingWebhookConfiguration (`vproject.kube-dc.com`), quoted in denials. */
  name: string;
  rules: AdmissionRule[];
  namespaceSelector?: LabelSelector;
  objectSelector?: LabelSelector;
  /** What happens when the handler throws (the webhook cannot be called): Fail (the default) refuses the write. */
  failurePolicy?: 'Fail' | 'Ignore';
  handler: (request: AdmissionRequest) => WebhookAnswer;
}

/**
 * ToStatusErr: `<resource>.<group> "<name>" is forbidden: admission webhook "<webhook>" denied the request:
 * <message>`, with the code the webhook gave (403 when none) and its reason (Forbidden when none); a 500
 * reads `Internal error occurred: ...` instead.
 */
export function webhookDenial(
  request: AdmissionRequest,
  webhook: string,
  answer: { message?: string; reason?: string; code?: number },
): KubeApiError {
  const code = answer.code && answer.code !== 0 ? answer.code : 403;
  const deniedBy = `admission webhook ${JSON.stringify(webhook)} denied the request`;
  const text = answer.message
    ? `${deniedBy}: ${answer.message}`
    : answer.reason
      ? `${deniedBy}: ${answer.reason}`
      : `${deniedBy} without explanation`;
  const name = request.name || 'Unknown';
  const prefix = code === 500 ? 'Internal error occurred' : `${groupResource(request)} ${JSON.stringify(name)} is forbidden`;
  const reason = answer.reason || (code === 500 ? 'InternalError' : 'Forbidden');
  const details =
    code === 500
      ? { causes: [{ message: text }] }
      : { name, ...(request.type.group ? { group: request.type.group } : {}), kind: request.type.plural };
  return new KubeApiError(code, reason, `${prefix}: ${text}`, details);
}

/** The registry of webhooks (`kube.webhooks`), and the admission hook that calls them. */
export class Webhooks {
  readonly #store: ObjectStore;
  readonly #webhooks = new Map<string, Webhook>();
  /** Every call made, in order: which webhook saw which request. */
  readonly calls: Array<{ webhook: string; request: AdmissionRequest }> = [];

  constructor(store: ObjectStore) {
    this.#store = store;
  }

  /** Adds (or replaces, by name) a webhook; the function returned removes it. */
  add(webhook: Webhook): () => void {
    this.#webhooks.set(webhook.name, webhook);
    return () => this.remove(webhook.name);
  }

  remove(name: string): void {
    this.#webhooks.delete(name);
  }

  get names(): string[] {
    return [...this.#webhooks.keys()];
  }

  /** Calls every matching webhook, in the order they were added; the first refusal answers the write. */
  readonly hook: AdmissionHook = (request) => {
    if (isExempt(request)) return;
    for (const webhook of this.#webhooks.values()) {
      if (!webhook.rules.some((rule) => ruleMatches(rule, request))) continue;
      if (!namespaceSelectorMatches(this.#store, webhook.namespaceSelector, request)) continue;
      if (!objectSelectorMatches(webhook.objectSelector, request)) continue;
      this.calls.push({ webhook: webhook.name, request: structuredClone(request) });
      let answer: WebhookAnswer;
      try {
        answer = webhook.handler(structuredClone(request));
      } catch (error) {
        if (error instanceof KubeApiError) throw error;
        if (webhook.failurePolicy === 'Ignore') continue;
        // webhookutil.ErrCallingWebhook wrapped by apierrors.NewInternalError.
        const text = `failed calling webhook ${JSON.stringify(webhook.name)}: ${(error as Error).message}`;
        throw new KubeApiError(500, 'InternalError', `Internal error occurred: ${text}`, { causes: [{ message: text }] });
      }
      const warnings = answer === true ? [] : (answer.warnings ?? []);
      if (warnings.length > 0) request.warnings?.push(...warnings);
      if (answer !== true && !answer.allowed) throw webhookDenial(request, webhook.name, answer);
    }
  };
}
