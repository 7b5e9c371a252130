import type { Db } from '../infra/db/handle.ts';
import { newId } from '../infra/ids.ts';
import type { Page, ScopedCursors } from '../infra/pagination/cursor.ts';
import { toPage } from '../infra/pagination/cursor.ts';
import type { AuditEntry } from './schemas.ts';
import type { AuditTables } from './tables.ts';

/** Who did what, recorded by the caller inside the transaction that made the change. */
export interface AuditRecord {
  actor: string;
  action: string;
  partnerId: string | null;
  target: string;
  before: unknown;
  after: unknown;
  requestId: string;
  at: Date;
}

export async function insertAudit(trx: Db<AuditTables>, record: AuditRecord): Promise<void> {
  await trx
    .insertInto('audit_log')
    .values({
      id: newId('audit', record.at.getTime()),
      at: record.at,
      actor: record.actor,
      action: record.action,
      partner_id: record.partnerId,
      target: record.target,
      before: record.before === undefined ? null : JSON.stringify(record.before),
      after: record.after === undefined ? null : JSON.stringify(record.after),
      request_id: record.requestId,
    })
    .execute();
}

export async function selectAuditPage(
  db: Db<AuditTables>,
  cursors: ScopedCursors,
  query: { partner?: string | undefined; limit: number; cursor?: string | undefined },
): Promise<Page<AuditEntry>> {
  const filters = { partner: query.partner };
  let select = db
    .selectFrom('audit_log')
    .selectAll()
    .orderBy('id', 'desc')
    .limit(query.limit + 1);
  if (query.partner !== undefined) select = select.where('partner_id', '=', query.partner);
  if (query.cursor !== undefined) {
    const [lastId] = cursors.decode(query.cursor, 'audit', filters);
    select = select.where('id', '<', String(lastId));
  }
  const rows = await select.execute();
  return toPage(
    rows,
    query.limit,
    (row) => ({
      id: row.id,
      at: row.at.toISOString(),
      actor: row.actor,
      action: row.action,
      partner_id: row.partner_id,
      target: row.target,
      before: row.before ?? null,
      after: row.after ?? null,
      request_id: row.request_id,
    }),
    (last) => cursors.encode('audit', filters, [last.id]),
  );
}
