import { sql } from 'kysely';
import type { Db } from '../infra/db/handle.ts';
import { ApiError } from '../infra/errors/catalogue.ts';
import { CUSTOMER_PREFIX_MAX } from './schemas.ts';
import { findClashingPrefix, type PartnerRow } from './store.ts';
import type { PartnerTables } from './tables.ts';

/** The partner id cut to Kube-DC's 16 characters, without a trailing dash (a DNS label ends with a letter or digit). */
export function defaultCustomerPrefix(partnerId: string): string {
  return partnerId.slice(0, CUSTOMER_PREFIX_MAX).replace(/-+$/, '');
}

export interface OverlappingPrefixes {
  partners: [string, string];
  customer_prefixes: [string, string];
}

/**
 * The pairs of partners whose prefixes overlap: what an earlier version could leave (prefixes were once the
 * ids, unchecked). A migration cannot choose new names for them, so start-up names them instead.
 */
export async function findOverlappingPrefixes(db: Db<PartnerTables>): Promise<OverlappingPrefixes[]> {
  const rows = await db.selectFrom('partners').select(['id', 'customer_prefix']).execute();
  // Sorted by `<prefix>-`, the keys a key begins come right after it: each is compared with its run only.
  const sorted = rows
    .map((row) => ({ ...row, key: `${row.customer_prefix}-` }))
    .sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
  const pairs: OverlappingPrefixes[] = [];
  for (const [i, first] of sorted.entries()) {
    for (const second of sorted.slice(i + 1)) {
      if (!second.key.startsWith(first.key)) break;
      pairs.push({ partners: [first.id, second.id], customer_prefixes: [first.customer_prefix, second.customer_prefix] });
    }
  }
  return pairs;
}

/**
 * Taken by every write of a prefix before its check, in the same transaction: two operator calls cannot
 * both find no overlap and both write (`a` and `a-b` at once). Released at commit; prefixes change rarely.
 */
export async function lockCustomerPrefixes(trx: Db<PartnerTables>): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext('partners:customer-prefixes'))`.execute(trx);
}

/**
 * 409 CONFLICT naming the partner whose prefix overlaps this one. The operator may see every partner; a
 * partner never sees this answer (its customer creates use the prefix they were given).
 */
export async function assertPrefixFree(trx: Db<PartnerTables>, prefix: string, partnerId: string): Promise<void> {
  const clash = await findClashingPrefix(trx, prefix, partnerId);
  if (!clash) return;
  throw new ApiError(
    'CONFLICT',
    `The customer prefix ${prefix} overlaps the prefix ${clash.customer_prefix} of partner ${clash.id}: ${sharedName(prefix, clash)}; choose another with --customer-prefix.`,
    { details: { field: 'customer_prefix', value: prefix, partner_id: clash.id, partner_customer_prefix: clash.customer_prefix } },
  );
}

/** A platform name both partners' customers could take, as the operator would meet it. */
function sharedName(prefix: string, other: PartnerRow): string {
  if (prefix === other.customer_prefix) return `a customer id of each would be one platform name, ${prefix}-<id>`;
  const [shorter, longer] =
    prefix.length < other.customer_prefix.length ? [prefix, other.customer_prefix] : [other.customer_prefix, prefix];
  const rest = longer.slice(shorter.length + 1);
  return `customer ${rest}-x of ${shorter} and customer x of ${longer} would both be the platform organization ${longer}-x`;
}

/**
 * A free prefix near the one wanted, for an operator who chose none: itself, else without dashes (which
 * cannot extend another prefix with a dash), numbered (`acmeco2`, `acmeco3`, ...) until no partner's overlaps.
 */
export async function freePrefix(trx: Db<PartnerTables>, wanted: string): Promise<string> {
  const base = wanted.replace(/-/g, '');
  for (let n = 0; n < 1_000; n++) {
    const candidate = n === 0 ? wanted : n === 1 ? base : `${base.slice(0, CUSTOMER_PREFIX_MAX - String(n).length)}${n}`;
    if (!(await findClashingPrefix(trx, candidate))) return candidate;
  }
  throw new ApiError('CONFLICT', `No free customer prefix near ${wanted}; choose one with --customer-prefix.`, {
    details: { field: 'customer_prefix', value: wanted },
  });
}
