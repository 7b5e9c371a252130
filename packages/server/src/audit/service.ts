import type { Db } from '../infra/db/handle.ts';
import type { Page, ScopedCursors } from '../infra/pagination/cursor.ts';
import type { AuditEntry } from './schemas.ts';
import { type AuditRecord, insertAudit, selectAuditPage } from './store.ts';
import type { AuditTables } from './tables.ts';

export type { AuditRecord } from './store.ts';

/**
 * The audit log as other modules use it: an entry is written in the transaction of the change it
 * records (the caller's, typed here on the audit's own table), and read a page at a time by the operator.
 */
export function writeAudit(trx: Db<AuditTables>, record: AuditRecord): Promise<void> {
  return insertAudit(trx, record);
}

export function listAudit(
  db: Db<AuditTables>,
  cursors: ScopedCursors,
  query: { partner?: string | undefined; limit: number; cursor?: string | undefined },
): Promise<Page<AuditEntry>> {
  return selectAuditPage(db, cursors, query);
}
