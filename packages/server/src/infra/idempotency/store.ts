import { sql } from 'kysely';
import type { Db as Handle } from '../db/handle.ts';
import type { KeyMode } from '../mode.ts';
import type { IdempotencyTables } from './tables.ts';

/** This module's own tables: infrastructure knows no domain module's. */
type Db = Handle<IdempotencyTables>;

/** partner-api.md: keys are kept 24 hours. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** A first request that has not finished in this time is presumed dead (its process crashed). */
export const IDEMPOTENCY_LEASE_MS = 60 * 1000;

export interface IdempotencyScope {
  partnerId: string;
  mode: KeyMode;
  key: string;
}

export type ClaimResult =
  | { kind: 'claimed' }
  | { kind: 'replay'; statusCode: number; body: string; requestId: string }
  | { kind: 'reused' }
  | { kind: 'in_progress' };

/**
 * Claims a key for one request. The INSERT is the race: of many concurrent
 * requests with one key exactly one inserts the row and runs; the others see
 * it running, finished (and replay it), or taken by a different request.
 */
export async function claimKey(db: Db, scope: IdempotencyScope, fingerprint: string, requestId: string, now: Date): Promise<ClaimResult> {
  const fresh = {
    fingerprint,
    state: 'running' as const,
    status_code: null,
    body: null,
    request_id: requestId,
    locked_until: new Date(now.getTime() + IDEMPOTENCY_LEASE_MS),
    expires_at: new Date(now.getTime() + IDEMPOTENCY_TTL_MS),
    created_at: now,
  };
  for (let attempt = 0; attempt < 3; attempt++) {
    const inserted = await db
      .insertInto('idempotency_keys')
      .values({ partner_id: scope.partnerId, mode: scope.mode, key: scope.key, ...fresh })
      .onConflict((oc) => oc.columns(['partner_id', 'mode', 'key']).doNothing())
      .returning('key')
      .executeTakeFirst();
    if (inserted) return { kind: 'claimed' };

    const row = await byScope(db, scope).selectAll().executeTakeFirst();
    if (!row) continue;
    const expired = row.expires_at.getTime() <= now.getTime();
    const abandoned = row.state === 'running' && row.locked_until.getTime() <= now.getTime();
    if (!expired && row.fingerprint !== fingerprint) return { kind: 'reused' };
    if (expired || abandoned) {
      const taken = await db
        .updateTable('idempotency_keys')
        .set(fresh)
        .where('partner_id', '=', scope.partnerId)
        .where('mode', '=', scope.mode)
        .where('key', '=', scope.key)
        .where('request_id', '=', row.request_id)
        // Still as we judged it: a first request that finished meanwhile keeps its response.
        .where((eb) => (expired ? eb('expires_at', '<=', now) : eb.and([eb('state', '=', 'running'), eb('locked_until', '<=', now)])))
        .returning('key')
        .executeTakeFirst();
      if (taken) return { kind: 'claimed' };
      continue;
    }
    if (row.state === 'running') return { kind: 'in_progress' };
    return { kind: 'replay', statusCode: row.status_code ?? 200, body: row.body ?? '', requestId: row.request_id };
  }
  return { kind: 'in_progress' };
}

export async function completeKey(db: Db, scope: IdempotencyScope, requestId: string, statusCode: number, body: string): Promise<void> {
  await byScopeUpdate(db, scope, requestId).set({ state: 'done', status_code: statusCode, body }).execute();
}

export interface CompletedKey {
  scope: IdempotencyScope;
  requestId: string;
  statusCode: number;
  body: string;
}

/** `completeKey` for several keys in one statement (the answers of a batch committed together). */
export async function completeKeys(db: Db, keys: CompletedKey[]): Promise<void> {
  if (keys.length === 0) return;
  if (keys.length === 1) {
    const [only] = keys as [CompletedKey];
    return completeKey(db, only.scope, only.requestId, only.statusCode, only.body);
  }
  const rows = JSON.stringify(
    keys.map((k) => ({
      partner_id: k.scope.partnerId,
      mode: k.scope.mode,
      key: k.scope.key,
      request_id: k.requestId,
      status_code: k.statusCode,
      body: k.body,
    })),
  );
  await sql`update idempotency_keys as k set state = 'done', status_code = v.status_code, body = v.body
    from jsonb_to_recordset(${rows}::jsonb) as v(partner_id text, mode text, key text, request_id text, status_code integer, body text)
    where k.partner_id = v.partner_id and k.mode = v.mode and k.key = v.key and k.request_id = v.request_id`.execute(db);
}

/**
 * Forgets a claim whose request failed unexpectedly, so a retry with the key runs again; never an answer
 * already committed (a commit whose acknowledgement was lost still answers the retry).
 */
export async function releaseKey(db: Db, scope: IdempotencyScope, requestId: string): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('partner_id', '=', scope.partnerId)
    .where('mode', '=', scope.mode)
    .where('key', '=', scope.key)
    .where('request_id', '=', requestId)
    .where('state', '=', 'running')
    .execute();
}

/**
 * Forgets every claim still running: for a process that owns its database alone (the embedded one),
 * at start, when any running claim is one its killed predecessor left.
 */
export async function releaseRunningKeys(db: Db): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys').where('state', '=', 'running').executeTakeFirst();
  return Number(result.numDeletedRows);
}

export async function deleteExpiredKeys(db: Db, now: Date): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys').where('expires_at', '<=', now).executeTakeFirst();
  return Number(result.numDeletedRows);
}

function byScope(db: Db, scope: IdempotencyScope) {
  return db
    .selectFrom('idempotency_keys')
    .where('partner_id', '=', scope.partnerId)
    .where('mode', '=', scope.mode)
    .where('key', '=', scope.key);
}

function byScopeUpdate(db: Db, scope: IdempotencyScope, requestId: string) {
  return db
    .updateTable('idempotency_keys')
    .where('partner_id', '=', scope.partnerId)
    .where('mode', '=', scope.mode)
    .where('key', '=', scope.key)
    .where('request_id', '=', requestId);
}
