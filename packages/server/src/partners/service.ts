import { writeAudit } from '../audit/store.ts';
import { SCOPES } from '../auth/scopes.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/database.ts';
import { ApiError, notFound } from '../infra/errors/catalogue.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import type { PartnerCache } from './partner-cache.ts';
import { type CreatePartnerRequest, PARTNER_DEFAULTS, type Partner, type UpdatePartnerRequest } from './schemas.ts';
import { findPartner, findPartnerForUpdate, insertPartner, listPartners, type PartnerRow, updatePartner } from './store.ts';

/** Who asked for an operator change, for the audit log. */
export interface OperatorActor {
  actor: string;
  requestId: string;
}

export interface PartnerServiceDeps {
  db: Db;
  clock: Clock;
  cursors: CursorCodec;
  cache: PartnerCache;
  /** How long a new partner's credentials take to provision (PARTNER_NOT_READY until then). */
  setupMs: number;
  /** Called in the transaction that suspends a partner. */
  onPartnerSuspended: (trx: Db, partnerId: string) => Promise<void>;
}

function partnerStatus(row: PartnerRow, nowMs: number): Partner['status'] {
  if (row.status === 'suspended') return 'suspended';
  return row.ready_at.getTime() > nowMs ? 'provisioning' : 'active';
}

export function toPartner(row: PartnerRow, nowMs: number): Partner {
  return {
    id: row.id,
    display_name: row.display_name,
    status: partnerStatus(row, nowMs),
    scopes: row.scopes,
    limits: {
      max_customers: row.max_customers,
      max_projects_per_customer: row.max_projects_per_customer,
      max_open_operations: row.max_open_operations,
      max_usage_window_days: row.usage_window_days,
      rate_limit_per_minute: row.rate_limit_per_minute,
      rate_limit_burst: row.rate_limit_burst,
    },
    defaults: { plan_id: row.default_plan_id, grace_days: row.grace_days },
    allow_private_webhooks: row.allow_private_webhooks,
    customer_count: row.customer_count,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    suspended_at: row.suspended_at ? row.suspended_at.toISOString() : null,
  };
}

type Settings = Pick<UpdatePartnerRequest, 'scopes' | 'limits' | 'defaults' | 'allow_private_webhooks'>;

/** Column values for the settings a request names; the rest stay as they are. */
function settingsColumns(settings: Settings): Partial<PartnerRow> {
  const out: Partial<PartnerRow> = {};
  const { limits, defaults } = settings;
  if (settings.scopes !== undefined) out.scopes = SCOPES.filter((s) => settings.scopes?.includes(s));
  if (limits?.max_customers !== undefined) out.max_customers = limits.max_customers;
  if (limits?.max_projects_per_customer !== undefined) out.max_projects_per_customer = limits.max_projects_per_customer;
  if (limits?.max_open_operations !== undefined) out.max_open_operations = limits.max_open_operations;
  if (limits?.max_usage_window_days !== undefined) out.usage_window_days = limits.max_usage_window_days;
  if (limits?.rate_limit_per_minute !== undefined) out.rate_limit_per_minute = limits.rate_limit_per_minute;
  if (limits?.rate_limit_burst !== undefined) out.rate_limit_burst = limits.rate_limit_burst;
  if (defaults?.plan_id !== undefined) out.default_plan_id = defaults.plan_id;
  if (defaults?.grace_days !== undefined) out.grace_days = defaults.grace_days;
  if (settings.allow_private_webhooks !== undefined) out.allow_private_webhooks = settings.allow_private_webhooks;
  return out;
}

export class PartnerService {
  readonly #deps: PartnerServiceDeps;

  constructor(deps: PartnerServiceDeps) {
    this.#deps = deps;
  }

  async create(request: CreatePartnerRequest, who: OperatorActor): Promise<Partner> {
    const { db, clock, setupMs } = this.#deps;
    const now = clock.now();
    const d = PARTNER_DEFAULTS;
    const row: PartnerRow = {
      id: request.id,
      display_name: request.display_name,
      status: 'active',
      scopes: [...SCOPES],
      max_customers: d.limits.max_customers,
      max_projects_per_customer: d.limits.max_projects_per_customer,
      max_open_operations: d.limits.max_open_operations,
      usage_window_days: d.limits.max_usage_window_days,
      rate_limit_per_minute: d.limits.rate_limit_per_minute,
      rate_limit_burst: d.limits.rate_limit_burst,
      allow_private_webhooks: false,
      default_plan_id: d.defaults.plan_id,
      grace_days: d.defaults.grace_days,
      customer_count: 0,
      test_customer_count: 0,
      test_clock_offset_ms: 0,
      ready_at: new Date(now.getTime() + setupMs),
      suspended_at: null,
      created_at: now,
      updated_at: now,
      ...settingsColumns(request),
    };
    return db.transaction().execute(async (trx) => {
      if (!(await insertPartner(trx, row))) {
        throw new ApiError('ALREADY_EXISTS', `Partner ${request.id} already exists.`, { details: { id: request.id } });
      }
      const created = toPartner(row, now.getTime());
      await writeAudit(trx, { ...audit(who, now, 'partner.create', row.id), before: null, after: created });
      return created;
    });
  }

  async get(id: string): Promise<Partner> {
    const row = await findPartner(this.#deps.db, id);
    if (!row) throw notFound(`Partner ${id}`);
    return toPartner(row, this.#deps.clock.nowMs());
  }

  async list(query: { limit: number; cursor?: string | undefined }): Promise<Page<Partner>> {
    const nowMs = this.#deps.clock.nowMs();
    return listPartners(this.#deps.db, this.#deps.cursors, query, (row) => toPartner(row, nowMs));
  }

  async update(id: string, request: UpdatePartnerRequest, who: OperatorActor): Promise<Partner> {
    const changes: Partial<PartnerRow> = settingsColumns(request);
    if (request.display_name !== undefined) changes.display_name = request.display_name;
    return this.#change(id, 'partner.update', who, () => changes);
  }

  /** Suspends the account: token exchanges and calls stop, and its customers' users' console sessions end. */
  async suspend(id: string, who: OperatorActor): Promise<Partner> {
    return this.#change(
      id,
      'partner.suspend',
      who,
      (row, now) => (row.status === 'suspended' ? undefined : { status: 'suspended', suspended_at: now }),
      (trx) => this.#deps.onPartnerSuspended(trx, id),
    );
  }

  async unsuspend(id: string, who: OperatorActor): Promise<Partner> {
    return this.#change(id, 'partner.unsuspend', who, (row) =>
      row.status === 'suspended' ? { status: 'active', suspended_at: null } : undefined,
    );
  }

  /**
   * Locks the partner, applies `decide`'s changes and audits them in one
   * transaction. `decide` returning undefined means "already so": nothing is
   * written and the current record is returned.
   */
  async #change(
    id: string,
    action: string,
    who: OperatorActor,
    decide: (row: PartnerRow, now: Date) => Partial<PartnerRow> | undefined,
    also?: (trx: Db) => Promise<void>,
  ): Promise<Partner> {
    const { db, clock, cache } = this.#deps;
    const now = clock.now();
    const result = await db.transaction().execute(async (trx) => {
      const row = await findPartnerForUpdate(trx, id);
      if (!row) throw notFound(`Partner ${id}`);
      const changes = decide(row, now);
      if (changes === undefined) return toPartner(row, now.getTime());
      const updated = await updatePartner(trx, id, { ...changes, updated_at: now });
      const before = toPartner(row, now.getTime());
      const after = toPartner(updated, now.getTime());
      await writeAudit(trx, { ...audit(who, now, action, id), before, after });
      await also?.(trx);
      return after;
    });
    cache.invalidate(id);
    return result;
  }
}

function audit(who: OperatorActor, at: Date, action: string, partnerId: string) {
  return { actor: who.actor, requestId: who.requestId, at, action, partnerId, target: `partner/${partnerId}` };
}
