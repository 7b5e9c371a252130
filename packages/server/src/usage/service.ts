import { platformContext, type Tenant } from '../auth/tenant.ts';
import { organizationRef } from '../customers/lifecycle.ts';
import { requireCustomer, type UsageSubjectRow, usageSubjectsOf } from '../customers/lookup-service.ts';
import type { CustomerTables } from '../customers/tables.ts';
import type { Db } from '../infra/db/handle.ts';
import { ApiError, validationError } from '../infra/errors/catalogue.ts';
import { type CursorCodec, type Page, toPage } from '../infra/pagination/cursor.ts';
import type { Platform, UsageTotals } from '../platform/platform.ts';
import type { UsageRecord } from './schemas.ts';

const DAY_MS = 24 * 60 * 60 * 1000;
const DEFAULT_WINDOW_DAYS = 7;

interface Window {
  from: Date;
  to: Date;
  fromDay: string;
  toDay: string;
}

/** `GET /usage` and `GET /customers/{id}/usage`: what the platform measured, per customer. */
export class UsageService {
  readonly #db: Db<CustomerTables>;
  readonly #cursors: CursorCodec;
  readonly #platform: Platform;

  constructor(deps: { db: Db<CustomerTables>; cursors: CursorCodec; platform: Platform }) {
    this.#db = deps.db;
    this.#cursors = deps.cursors;
    this.#platform = deps.platform;
  }

  /**
   * Every customer by id, a page at a time, with the customers deleted within the window (a partner
   * bills them: their usage until deletion, and `deleted_at`); usage is computed for the page only.
   */
  async list(
    tenant: Tenant,
    query: { limit: number; cursor?: string | undefined; from?: string | undefined; to?: string | undefined },
  ): Promise<Page<UsageRecord>> {
    const window = usageWindow(tenant, query);
    const cursors = this.#cursors.scoped(tenant);
    const filters = { from: window.fromDay, to: window.toDay };
    let after: { id: string; createdAt: Date } | undefined;
    if (query.cursor !== undefined) {
      const [id, createdAt] = cursors.decode(query.cursor, 'usage', filters);
      after = { id: String(id), createdAt: new Date(String(createdAt)) };
    }
    const rows = await usageSubjectsOf(this.#db, tenant, window, after, query.limit + 1);
    const totals = await this.#measure(tenant, rows.slice(0, query.limit), window);
    return toPage(
      rows,
      query.limit,
      (row) => toRecord(row, window, totals.get(subjectKey(row))),
      (last) => cursors.encode('usage', filters, [last.id, last.created_at.toISOString()]),
    );
  }

  async forCustomer(tenant: Tenant, id: string, query: { from?: string | undefined; to?: string | undefined }): Promise<UsageRecord> {
    const window = usageWindow(tenant, query);
    const row = await requireCustomer(this.#db, tenant, id);
    const subject = { id: row.id, organization: row.organization, created_at: row.created_at, deleted_at: null };
    const totals = await this.#measure(tenant, [subject], window);
    return toRecord(subject, window, totals.get(subjectKey(subject)));
  }

  /** Asks the platform (no transaction open); a usage source that cannot be read now answers 503 UNAVAILABLE. */
  async #measure(tenant: Tenant, rows: UsageSubjectRow[], window: Window): Promise<Map<string, UsageTotals>> {
    // A customer id may stand for a deleted customer and a later one: the platform reports per subject.
    const subjects = rows.map((row) => ({
      ...organizationRef(row),
      customerId: subjectKey(row),
      since: row.created_at,
      until: row.deleted_at,
    }));
    const totals = await this.#platform.usage(platformContext(tenant), subjects, window.from, window.to);
    if (!totals) throw new ApiError('UNAVAILABLE', 'Usage cannot be read from the platform right now. Retry later.', { retryAfter: 30 });
    return totals;
  }
}

const subjectKey = (row: Pick<UsageSubjectRow, 'id' | 'created_at'>) => `${row.id}@${row.created_at.toISOString()}`;

/** The window of a usage query: UTC days, `to` exclusive, at most the partner's `max_usage_window_days`. */
function usageWindow(tenant: Tenant, query: { from?: string | undefined; to?: string | undefined }): Window {
  const day = (value: string, field: 'from' | 'to'): Date => {
    const at = new Date(`${value}T00:00:00Z`);
    if (Number.isNaN(at.getTime()) || at.toISOString().slice(0, 10) !== value) {
      throw validationError([{ in: 'query', field, message: 'is not a calendar date (YYYY-MM-DD)' }]);
    }
    return at;
  };
  const today = new Date(Math.floor(tenant.now.getTime() / DAY_MS) * DAY_MS);
  const to = query.to !== undefined ? day(query.to, 'to') : new Date(today.getTime() + DAY_MS);
  const from = query.from !== undefined ? day(query.from, 'from') : new Date(to.getTime() - DEFAULT_WINDOW_DAYS * DAY_MS);
  if (from >= to) throw validationError([{ in: 'query', field: 'from', message: 'must be before to' }]);
  const days = (to.getTime() - from.getTime()) / DAY_MS;
  const max = tenant.partner.usage_window_days;
  if (days > max) {
    throw validationError(
      [{ in: 'query', field: 'to', message: `makes a window of ${days} days; at most ${max} (limits.max_usage_window_days)` }],
      undefined,
      {
        max_usage_window_days: max,
        window_days: days,
      },
    );
  }
  return { from, to, fromDay: from.toISOString().slice(0, 10), toDay: to.toISOString().slice(0, 10) };
}

/** Hours to six decimals: exact for the sandbox's whole seconds, and stable to compare. */
const round = (hours: number) => Math.round(hours * 1e6) / 1e6;

function toRecord(row: UsageSubjectRow, window: Window, totals: UsageTotals | undefined): UsageRecord {
  return {
    customer_id: row.id,
    deleted_at: row.deleted_at ? row.deleted_at.toISOString() : null,
    from: window.fromDay,
    to: window.toDay,
    vcpu_hours: round(totals?.vcpu_hours ?? 0),
    memory_gib_hours: round(totals?.memory_gib_hours ?? 0),
    storage_gib_hours: round(totals?.storage_gib_hours ?? 0),
    gpu_hours: Object.fromEntries(Object.entries(totals?.gpu_hours ?? {}).map(([p, h]) => [p, round(h)])),
  };
}
