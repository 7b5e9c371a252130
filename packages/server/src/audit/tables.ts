export interface AuditLogTable {
  id: string;
  at: Date;
  actor: string;
  action: string;
  partner_id: string | null;
  target: string;
  before: unknown;
  after: unknown;
  request_id: string;
}

/** The tables this module owns, as the composition root merges them into the database type. */
export interface AuditTables {
  audit_log: AuditLogTable;
}
