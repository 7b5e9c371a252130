import { Type } from 'typebox';

/** CONTRACT §1: customer ids, project names and usernames are DNS labels (they name platform objects). */
export const DNS_LABEL = '^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$';
/** A namespace is `<customer id>-<project name>`, itself a DNS label of at most 63 characters. */
export const NAMESPACE_MAX = 63;

export const CustomerId = Type.String({ pattern: DNS_LABEL, description: 'Customer id: a DNS label of 1 to 40 characters.' });
export const ProjectName = Type.String({ pattern: DNS_LABEL, description: 'Project name: a DNS label of 1 to 40 characters.' });
export const Username = Type.String({
  pattern: DNS_LABEL,
  description: 'Username: a DNS label of 1 to 40 characters; `admin` is reserved (every organization realm has it).',
});

/**
 * Usernames a new user may not take, on every platform, so that a partner meets the refusal when it asks
 * rather than as a failed operation: Kube-DC's Organization controller makes a realm user `admin` in
 * every organization's realm (tests/e2e/organization_test.go in kube-dc-public), and Keycloak names the
 * users behind service accounts `service-account-<client>`.
 */
export function reservedUsername(username: string): string | undefined {
  if (username === 'admin') return 'is reserved: every organization already has a user admin, the administrator of its identity realm';
  if (username.startsWith('service-account-')) return 'is reserved: the identity provider names service accounts service-account-<client>';
  return undefined;
}
export const Email = Type.String({ format: 'email', maxLength: 254 });
export const PlanId = Type.String({ pattern: '^[a-z0-9][a-z0-9._-]{0,62}$', description: 'Plan id.' });

/** Path parameters shared by the routes under `/customers/{id}`. */
export const CustomerParams = Type.Object({ id: CustomerId }, { additionalProperties: false });
export const ProjectParams = Type.Object({ id: CustomerId, project: ProjectName }, { additionalProperties: false });
export const UserParams = Type.Object({ id: CustomerId, username: Username }, { additionalProperties: false });
