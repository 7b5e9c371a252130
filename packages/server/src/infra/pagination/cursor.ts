import { createCipheriv, createDecipheriv, createSecretKey, type KeyObject, randomBytes } from 'node:crypto';
import { Type } from 'typebox';
import { decodeCanonicalBase64url } from '../encoding.ts';
import { validationError } from '../errors/catalogue.ts';
import type { KeyMode } from '../mode.ts';
import { Text } from '../request-schemas.ts';

/**
 * Opaque keyset cursors. A cursor names whose list it pages (its scope), the
 * list and the filters it was issued under, and carries the sort key of the
 * last item returned; it is refused (400 VALIDATION_ERROR) in any other scope,
 * on any other list or with other filters. Cursors are encrypted and
 * authenticated (AES-256-GCM): a partner can neither read the internal ids they
 * carry nor make one up.
 */
export const PAGE_LIMIT_DEFAULT = 50;
export const PAGE_LIMIT_MAX = 200;

export const PageQuery = {
  limit: Type.Optional(
    Type.Integer({ minimum: 1, maximum: PAGE_LIMIT_MAX, default: PAGE_LIMIT_DEFAULT, description: 'Page size, 1 to 200.' }),
  ),
  cursor: Type.Optional(Text({ minLength: 1, maxLength: 1024, description: 'The `next_cursor` of the previous page, unchanged.' })),
};

export const PaginationSchema = Type.Object({
  next_cursor: Type.Union([Type.String(), Type.Null()]),
  limit: Type.Integer(),
});

export type SortKey = readonly (string | number)[];

export interface Page<T> {
  data: T[];
  pagination: { next_cursor: string | null; limit: number };
}

/**
 * Whose list a cursor pages. A partner's lists are the partner's in one mode (live and test keys see
 * separate data); the operator API's lists are one view, the same for every holder of the operator
 * token (the actor name it may send is self-declared, not an identity).
 */
export type CursorScope = { readonly partnerId: string; readonly mode: KeyMode } | 'operator';

/** The cursors of one scope's lists: encoded there, they decode nowhere else. */
export interface ScopedCursors {
  encode(list: string, filters: Record<string, unknown>, key: SortKey): string;
  /** The sort key a cursor carries, or a 400 naming why it cannot be used here. */
  decode(cursor: string, list: string, filters: Record<string, unknown>): SortKey;
}

interface CursorBody {
  s: string;
  l: string;
  f: string;
  k: SortKey;
}

const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const AAD = Buffer.from('tenantry cursor v1');

export class CursorCodec {
  /** A KeyObject, imported once: Node re-imports a Buffer key on every cipher it makes. */
  readonly #key: KeyObject;

  constructor(key: Buffer) {
    this.#key = createSecretKey(key);
  }

  /** The codec of one scope's lists; every list reaches cursors through it, so none can forget whose it is. */
  scoped(scope: CursorScope): ScopedCursors {
    const owner = scopeKey(scope);
    return {
      encode: (list, filters, key) => this.#encode(owner, list, filters, key),
      decode: (cursor, list, filters) => this.#decode(cursor, owner, list, filters),
    };
  }

  #encode(scope: string, list: string, filters: Record<string, unknown>, key: SortKey): string {
    const body = Buffer.from(JSON.stringify({ s: scope, l: list, f: fingerprint(filters), k: key } satisfies CursorBody));
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, nonce);
    cipher.setAAD(AAD);
    return Buffer.concat([nonce, cipher.update(body), cipher.final(), cipher.getAuthTag()]).toString('base64url');
  }

  #decode(cursor: string, scope: string, list: string, filters: Record<string, unknown>): SortKey {
    const invalid = (message: string) => validationError([{ in: 'query', field: 'cursor', message }]);
    const sealed = decodeCanonicalBase64url(cursor);
    if (!sealed || sealed.length <= NONCE_BYTES + TAG_BYTES) throw invalid('is not a cursor issued by this API');
    let parsed: CursorBody;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, sealed.subarray(0, NONCE_BYTES));
      decipher.setAAD(AAD);
      decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
      const body = Buffer.concat([decipher.update(sealed.subarray(NONCE_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
      parsed = JSON.parse(body.toString('utf8')) as CursorBody;
    } catch {
      throw invalid('is not a cursor issued by this API');
    }
    // Another partner's or mode's cursor is told apart from another list's by nothing, so it reveals nothing.
    if (parsed.s !== scope || parsed.l !== list) throw invalid('belongs to another list');
    if (parsed.f !== fingerprint(filters)) {
      throw invalid('was issued with other filters; pass every other query parameter unchanged');
    }
    return parsed.k;
  }
}

function scopeKey(scope: CursorScope): string {
  return scope === 'operator' ? 'operator' : `${scope.mode}:${scope.partnerId}`;
}

function fingerprint(filters: Record<string, unknown>): string {
  const entries = Object.entries(filters)
    .filter(([, value]) => value !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : 1));
  return JSON.stringify(entries);
}

/**
 * Builds a page from `limit + 1` rows fetched in list order: the extra row only
 * tells whether another page exists, so `next_cursor` is null exactly at the end.
 */
export function toPage<Row, Item>(rows: Row[], limit: number, toItem: (row: Row) => Item, nextCursor: (last: Row) => string): Page<Item> {
  const hasMore = rows.length > limit;
  const pageRows = hasMore ? rows.slice(0, limit) : rows;
  const last = pageRows[pageRows.length - 1];
  return {
    data: pageRows.map(toItem),
    pagination: { next_cursor: hasMore && last !== undefined ? nextCursor(last) : null, limit },
  };
}
