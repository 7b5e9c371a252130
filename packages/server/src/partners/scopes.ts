/** The partner API's scopes (partner-api.md, Scopes): what a partner is granted, and what its tokens carry. */
export const SCOPES = ['customers:read', 'customers:write', 'customers:sso', 'usage:read'] as const;
export type Scope = (typeof SCOPES)[number];

export const isScope = (value: string): value is Scope => (SCOPES as readonly string[]).includes(value);
