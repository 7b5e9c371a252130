/** The partner API's scopes (partner-api.md, Scopes). */
export const SCOPES = ['customers:read', 'customers:write', 'customers:sso', 'usage:read'] as const;
export type Scope = (typeof SCOPES)[number];

export const isScope = (value: string): value is Scope => (SCOPES as readonly string[]).includes(value);
