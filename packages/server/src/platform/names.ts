import { Type } from 'typebox';

/** CONTRACT §1: customer ids, project names and usernames are DNS labels (they name platform objects). */
export const DNS_LABEL = '^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$';
/** A namespace is `<customer id>-<project name>`, itself a DNS label of at most 63 characters. */
export const NAMESPACE_MAX = 63;

export const CustomerId = Type.String({ pattern: DNS_LABEL, description: 'Customer id: a DNS label of 1 to 40 characters.' });
export const ProjectName = Type.String({ pattern: DNS_LABEL, description: 'Project name: a DNS label of 1 to 40 characters.' });
export const Username = Type.String({ pattern: DNS_LABEL, description: 'Username: a DNS label of 1 to 40 characters.' });
export const Email = Type.String({ format: 'email', maxLength: 254 });
export const PlanId = Type.String({ pattern: '^[a-z0-9][a-z0-9._-]{0,62}$', description: 'Plan id.' });

/** Path parameters shared by the routes under `/customers/{id}`. */
export const CustomerParams = Type.Object({ id: CustomerId }, { additionalProperties: false });
export const ProjectParams = Type.Object({ id: CustomerId, project: ProjectName }, { additionalProperties: false });
export const UserParams = Type.Object({ id: CustomerId, username: Username }, { additionalProperties: false });
