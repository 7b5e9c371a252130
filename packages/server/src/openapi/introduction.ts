import type { Scope } from '../partners/scopes.ts';

/**
 * What the OpenAPI document says before its operations: the introduction the reference at `/docs` opens
 * with (how a key becomes a token, the request rules every operation shares), the tags that group the
 * operations by module, and the contact and licence. The operations themselves describe themselves in
 * their routes.
 */

export const TOKEN_URL = '/api/public/v1/auth/token';

export const SCOPE_DESCRIPTIONS: Record<Scope, string> = {
  'customers:read': 'Read customers, projects, users, operations, quotas, capacity, webhooks and events',
  'customers:write': 'Create, change, suspend, resume and delete; configure webhooks',
  'customers:sso': 'Mint one-click console logins',
  'usage:read': 'Read usage',
};

const scopeTable = Object.entries(SCOPE_DESCRIPTIONS)
  .map(([scope, allows]) => `| \`${scope}\` | ${allows} |`)
  .join('\n');

export const INTRODUCTION = `Manage the customers, projects, users, quotas and webhooks of a GPU and VM cloud as its reseller.

Every path is under \`/api/public/v1\`. Answers are JSON in an envelope: \`{"status": "success", "data": ...}\` (lists add \`pagination\`), or \`{"status": "error", "error": {"code", "message", "request_id", "details"}}\`. Branch on \`code\`; each operation lists the codes it can answer under each status.

## Authentication: from API key to access token

Two credentials are involved. The **API key** (\`tnt_live_...\`, or \`tnt_test_...\` for test mode) is issued by your operator, lives long and stays on your servers. The **access token** is what every call but one carries.

1. Exchange the key at \`POST ${TOKEN_URL}\` with \`{"api_key": "tnt_live_..."}\` (or the OAuth form \`grant_type=client_credentials&client_secret=<key>\`). The answer is not enveloped: \`{"access_token": "tnt_at_...", "token_type": "Bearer", "expires_in": 900, "scope": "customers:read customers:write customers:sso usage:read"}\`.
2. Send \`Authorization: Bearer <access_token>\` on every other call.

\`\`\`sh
curl -s -X POST "$BASE/api/public/v1/auth/token" -H 'content-type: application/json' -d '{"api_key": "tnt_live_..."}'
curl -s "$BASE/api/public/v1/auth/whoami" -H "authorization: Bearer $TOKEN"
\`\`\`

- **Lifetime.** A token lives at most 15 minutes (\`expires_in\`, in seconds; never past the key's own expiry). Cache it, refresh it about 60 seconds before it expires, and let one caller refresh while the others wait. On a 401 from a normal call, exchange once and replay once; a second 401 means the key is revoked, expired or restricted.
- **Rate.** The token endpoint allows 30 exchanges a minute per key (burst 10): never exchange once per call.
- **Scopes.** A token carries the scopes granted to your partner when it was issued (\`scope\`); a call that needs another answers 403 \`FORBIDDEN\`. \`GET /auth/whoami\` needs none and shows them.

| Scope | Allows |
|---|---|
${scopeTable}

**Trying calls from this page.** Call *Exchange an API key for an access token* with your key, copy \`access_token\`, and paste it into the **bearerToken** authentication panel: every request sent from here then carries it.

## Request rules every operation shares

- Bodies are JSON objects in UTF-8 (\`content-type: application/json\`); a byte-order mark before the JSON is ignored. \`null\`, an empty body sent as JSON, or a body over 64 KiB answers 400 \`VALIDATION_ERROR\`. Where an operation's body is optional, sending none is the same as \`{}\`.
- Unknown fields and unknown query parameters are refused (400 \`VALIDATION_ERROR\`, each named in \`details.errors\`), never ignored. JSON values are not coerced: \`"5"\` is not an integer. Integers in query strings are decimal digits.
- Text never holds the NUL character (U+0000) or a lone surrogate: free-text fields say so with the pattern \`^[^\\u0000]*$\`.
- \`Idempotency-Key\` (1 to 255 visible ASCII characters) makes a retry of a POST, PUT or DELETE safe for 24 hours.
- Every authenticated answer carries \`X-RateLimit-Limit\` and \`X-RateLimit-Remaining\`; past the limit, 429 \`RATE_LIMITED\` with \`Retry-After\`.
`;

/** The operations' groups, one per module, in the order the reference shows them. */
export const TAGS = [
  { name: 'Authentication', description: 'Exchange an API key for an access token, and check what a token may do.' },
  {
    name: 'Customers',
    description: "Create, read, suspend, resume and delete customers: each a reseller's client with its own organization.",
  },
  { name: 'Projects', description: "A customer's projects: each a namespace on the platform, created and deleted asynchronously." },
  { name: 'Users', description: "A customer's users, and one-click logins to the customer's console." },
  { name: 'Operations', description: 'The record of each asynchronous creation and deletion, kept 7 days.' },
  { name: 'Capacity', description: "The partner's capacity pool, the plans it may assign, and each customer's quota and plan." },
  { name: 'Usage', description: 'Resource-hours per customer, by UTC day, for billing.' },
  {
    name: 'Webhooks',
    description: 'The signed webhook receiver: its configuration, secret, test ping and delivery log, and the events it receives.',
  },
  { name: 'Events', description: 'Every event of the last 30 days, to poll or to stream: what the webhook delivers.' },
  { name: 'Test helpers', description: 'Test mode only (`tnt_test_` keys): drive failures, workloads and the clock of the sandbox.' },
];

export const CONTACT = { name: 'The operator that issued your API key' };

/** The API's terms are each partner's agreement with its operator: no public licence describes them. */
export const LICENSE = { name: 'Proprietary: used under your partner agreement', identifier: 'LicenseRef-Tenantry-Partner-Agreement' };
