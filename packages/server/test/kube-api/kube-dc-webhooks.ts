/**
 * Kube-DC's validating webhooks as in-process doubles, for `kube.webhooks.add(...)`. Only what Kube-DC's
 * public chart says of them is modelled: their rules, failure policy and the refusal the chart comment
 * describes; the handlers' Go source is not public.
 */
import type { AdmissionRequest } from './store.ts';
import type { Webhook, WebhookAnswer } from './webhooks.ts';

/**
 * `vproject.kube-dc.com`: Project CREATE is refused when `spec.egressNetworkType` is `public` and public
 * projects are not allowed (Kube-DC charts/kube-dc/templates/manager-webhook.yaml:349-367 at 116783f: rules
 * kube-dc.com/v1 projects CREATE, failurePolicy Fail, no selectors; the comment at :349-353 says "rejects
 * spec.egressNetworkType=public on CREATE when master-config `allow_public_projects: false`"). The flag is
 * `manager.allowPublicProjects`, false by default (values.yaml:337-349). UPDATE is not checked: the CRD's
 * CEL rule makes egressNetworkType immutable.
 *
 * The message is ours: Kube-DC's real wording is in its private manager source. The answer is a 403, which
 * is what a controller-runtime validator's plain error turns into (admission.Denied); match on the refusal,
 * not on the text.
 */
export function kubeDcProjectWebhook(options: { allowPublicProjects: boolean }): Webhook {
  return {
    name: 'vproject.kube-dc.com',
    rules: [{ apiGroups: ['kube-dc.com'], apiVersions: ['v1'], operations: ['CREATE'], resources: ['projects'] }],
    failurePolicy: 'Fail',
    handler: (request: AdmissionRequest): WebhookAnswer => {
      const spec = (request.object?.spec ?? {}) as { egressNetworkType?: unknown };
      if (spec.egressNetworkType === 'public' && !options.allowPublicProjects)
        return {
          allowed: false,
          code: 403,
          reason: 'Forbidden',
          message:
            'public projects are not allowed on this installation: spec.egressNetworkType "public" needs allow_public_projects (wording of the test double)',
        };
      return true;
    },
  };
}
