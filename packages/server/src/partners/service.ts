import { writeAudit } from '../audit/service.ts';
import type { AuditTables } from '../audit/tables.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import { ApiError, notFound } from '../infra/errors/catalogue.ts';
import type { OperatorActor } from '../infra/http/operator-auth.ts';
import type { KeyMode } from '../infra/mode.ts';
import type { CursorCodec, Page } from '../infra/pagination/cursor.ts';
import type { PartnerCache } from './partner-cache.ts';
import type { ManagedPartner } from './partner-resource.ts';
import { assertPrefixFree, defaultCustomerPrefix, freePrefix, lockCustomerPrefixes } from './prefixes.ts';
import { type CreatePartnerRequest, PARTNER_DEFAULTS, type Partner, type UpdatePartnerRequest } from './schemas.ts';
import { SCOPES } from './scopes.ts';
import {
  adjustCustomerCount,
  advanceTestClock,
  findPartner,
  findPartnerForUpdate,
  insertPartner,
  listPartners,
  type PartnerRow,
  resetTestClock,
  updatePartner,
} from './store.ts';
import type { PartnerTables } from './tables.ts';

/** The partner service also writes the audit log. */
type PartnerServiceDb = Db<PartnerTables & AuditTables>;

export interface PartnerServiceDeps {
  db: PartnerServiceDb;
  clock: Clock;
  cursors: CursorCodec;
  cache: PartnerCache;
  /** How long a new partner's credentials take to provision (PARTNER_NOT_READY until then). */
  setupMs: number;
  /** Called in the transaction that suspends a partner. */
  onPartnerSuspended: (trx: PartnerServiceDb, partnerId: string) => Promise<void>;
}

/**
 * The partner a change of another module is made for, or 404: the operator's key and capacity
 * commands, in the caller's transaction or on its handle.
 */
export async function requirePartner(db: Db<PartnerTables>, id: string): Promise<PartnerRow> {
  const row = await findPartner(db, id);
  if (!row) throw notFound(`Partner ${id}`);
  return row;
}

/**
 * The partner's row, locked in the caller's transaction: a change counted against the partner's limits
 * (projects, open operations) holds it so that concurrent changes cannot both take the last place.
 * Lock order everywhere: partner, then customer, then project.
 */
export function lockPartner(trx: Db<PartnerTables>, id: string): Promise<PartnerRow | undefined> {
  return findPartnerForUpdate(trx, id);
}

/**
 * Counts `delta` customers more (or fewer) for the partner in this mode, in the caller's transaction:
 * the one that creates or removes them, with the partner's row locked (`lockPartner`) first.
 */
export function countPartnerCustomers(trx: Db<PartnerTables>, partnerId: string, mode: KeyMode, delta: number): Promise<void> {
  return adjustCustomerCount(trx, partnerId, mode, delta);
}

/** How far ahead of real time the partner's test clock runs (test mode moves it). */
export async function testClockOffsetMs(db: Db<PartnerTables>, partnerId: string): Promise<number> {
  return Number((await findPartner(db, partnerId))?.test_clock_offset_ms ?? 0);
}

/** Moves the partner's test clock forward by `ms`, never past `maxMs` ahead of real time; answers the new offset. */
export function advancePartnerTestClock(db: Db<PartnerTables>, partnerId: string, ms: number, maxMs: number): Promise<number> {
  return advanceTestClock(db, partnerId, ms, maxMs);
}

/** Puts the partner's test clock back on real time. */
export function resetPartnerTestClock(db: Db<PartnerTables>, partnerId: string): Promise<void> {
  return resetTestClock(db, partnerId);
}

function partnerStatus(row: PartnerRow, nowMs: number): Partner['status'] {
  if (row.status === 'suspended') return 'suspended';
  return row.ready_at.getTime() > nowMs ? 'provisioning' : 'active';
}

export function toPartner(row: PartnerRow, nowMs: number): Partner {
  return {
    id: row.id,
    display_name: row.display_name,
    customer_prefix: row.customer_prefix,
    portal_url: row.portal_url,
    contact_email: row.contact_email,
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
    defaults: { plan_id: row.default_plan_id, grace_days: row.grace_days, project: row.default_project },
    allow_private_webhooks: row.allow_private_webhooks,
    customer_count: row.customer_count,
    managed_by: row.managed_by,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    suspended_at: row.suspended_at ? row.suspended_at.toISOString() : null,
  };
}

type Settings = Pick<
  UpdatePartnerRequest,
  'scopes' | 'limits' | 'defaults' | 'allow_private_webhooks' | 'customer_prefix' | 'portal_url' | 'contact_email'
>;

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
  if (defaults?.project !== undefined) out.default_project = defaults.project;
  if (settings.portal_url !== undefined) out.portal_url = settings.portal_url;
  if (settings.contact_email !== undefined) out.contact_email = settings.contact_email;
  if (settings.allow_private_webhooks !== undefined) out.allow_private_webhooks = settings.allow_private_webhooks;
  if (settings.customer_prefix !== undefined) out.customer_prefix = settings.customer_prefix;
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
      customer_prefix: defaultCustomerPrefix(request.id),
      portal_url: null,
      contact_email: null,
      default_project: d.defaults.project,
      customer_count: 0,
      managed_by: null,
      test_customer_count: 0,
      test_clock_offset_ms: 0,
      ready_at: new Date(now.getTime() + setupMs),
      suspended_at: null,
      created_at: now,
      updated_at: now,
      ...settingsColumns(request),
    };
    return db.transaction().execute(async (trx) => {
      await lockCustomerPrefixes(trx);
      // An operator who did not choose a prefix gets a free one: the id cut short, numbered when another partner's overlaps.
      if (request.customer_prefix === undefined) row.customer_prefix = await freePrefix(trx, row.customer_prefix);
      else await assertPrefixFree(trx, row.customer_prefix, request.id);
      if (!(await insertPartner(trx, row))) {
        throw new ApiError('ALREADY_EXISTS', `Partner ${request.id} already exists.`, { details: { id: request.id } });
      }
      const created = toPartner(row, now.getTime());
      await writeAudit(trx, { ...audit(who, now, 'partner.create', row.id), before: null, after: created });
      return created;
    });
  }

  async get(id: string): Promise<Partner> {
    const row = await requirePartner(this.#deps.db, id);
    return toPartner(row, this.#deps.clock.nowMs());
  }

  async list(query: { limit: number; cursor?: string | undefined }): Promise<Page<Partner>> {
    const nowMs = this.#deps.clock.nowMs();
    return listPartners(this.#deps.db, this.#deps.cursors.scoped('operator'), query, (row) => toPartner(row, nowMs));
  }

  async update(id: string, request: UpdatePartnerRequest, who: OperatorActor): Promise<Partner> {
    const changes: Partial<PartnerRow> = settingsColumns(request);
    if (request.display_name !== undefined) changes.display_name = request.display_name;
    // A new prefix names customers created from now on; existing ones keep their platform names.
    return this.#change(id, 'partner.update', who, (row) => {
      refuseManaged(row, managedFieldsOf(request));
      return changes;
    });
  }

  /** Suspends the account: token exchanges and calls stop, and its customers' users' console sessions end. */
  async suspend(id: string, who: OperatorActor, managed = false): Promise<Partner> {
    return this.#change(
      id,
      'partner.suspend',
      who,
      (row, now) => {
        if (!managed) refuseManaged(row, ['suspension']);
        return row.status === 'suspended' ? undefined : { status: 'suspended', suspended_at: now };
      },
      (trx) => this.#deps.onPartnerSuspended(trx, id),
    );
  }

  async unsuspend(id: string, who: OperatorActor, managed = false): Promise<Partner> {
    return this.#change(id, 'partner.unsuspend', who, (row) => {
      if (!managed) refuseManaged(row, ['suspension']);
      return row.status === 'suspended' ? { status: 'active', suspended_at: null } : undefined;
    });
  }

  /** For the operator routes of other modules (capacity, plans, GPU profiles): 409 on a managed partner. */
  async assertUnmanaged(id: string, fields: string[]): Promise<void> {
    const row = await requirePartner(this.#deps.db, id);
    refuseManaged(row, fields);
  }

  /**
   * Applies a Partner resource's settings (`--watch-partners`): creates the partner, or adopts an unmanaged
   * one of that id, or updates the one it manages; suspension follows `spec.suspended`. A partner another
   * resource manages is left alone (CONFLICT). Keys, customers and unmanaged fields are never touched.
   */
  async applyManaged(desired: ManagedPartner, who: OperatorActor): Promise<Partner> {
    const { limits } = desired;
    const settings: Partial<PartnerRow> = {
      display_name: desired.display_name,
      scopes: desired.scopes,
      max_customers: limits.max_customers,
      max_projects_per_customer: limits.max_projects_per_customer,
      max_open_operations: limits.max_open_operations,
      rate_limit_per_minute: limits.rate_limit_per_minute,
      rate_limit_burst: limits.rate_limit_burst,
      managed_by: desired.source,
      ...(desired.plan_id !== undefined ? { default_plan_id: desired.plan_id } : {}),
      ...(desired.customer_prefix !== undefined ? { customer_prefix: desired.customer_prefix } : {}),
      portal_url: desired.portal_url,
      contact_email: desired.contact_email,
      default_project: desired.default_project,
    };
    const existing = await findPartner(this.#deps.db, desired.id);
    if (!existing) {
      try {
        await this.create(
          {
            // Every managed setting at once: the partner never exists with defaults it was not given.
            id: desired.id,
            display_name: desired.display_name,
            scopes: desired.scopes,
            limits: {
              max_customers: limits.max_customers,
              max_projects_per_customer: limits.max_projects_per_customer,
              max_open_operations: limits.max_open_operations,
              rate_limit_per_minute: limits.rate_limit_per_minute,
              rate_limit_burst: limits.rate_limit_burst,
            },
            ...(desired.plan_id !== undefined ? { defaults: { plan_id: desired.plan_id } } : {}),
            ...(desired.customer_prefix ? { customer_prefix: desired.customer_prefix } : {}),
          },
          who,
        );
      } catch (error) {
        if (!(error instanceof ApiError && error.code === 'ALREADY_EXISTS')) throw error;
      }
    }
    let partner = await this.#change(desired.id, 'partner.update', who, (row) => {
      if (row.managed_by !== null && row.managed_by !== desired.source) {
        throw new ApiError('CONFLICT', `Partner ${row.id} is already managed by the Partner resource ${row.managed_by}.`, {
          details: { managed_by: row.managed_by },
        });
      }
      const changed = Object.entries(settings).filter(
        ([key, value]) => JSON.stringify(row[key as keyof PartnerRow]) !== JSON.stringify(value),
      );
      return changed.length === 0 ? undefined : Object.fromEntries(changed);
    });
    if (desired.suspended && partner.status !== 'suspended') partner = await this.suspend(desired.id, who, true);
    if (!desired.suspended && partner.status === 'suspended') partner = await this.unsuspend(desired.id, who, true);
    return partner;
  }

  /** The resource was deleted: the partner stays (with its keys and customers), no longer managed. */
  async releaseManaged(source: string, who: OperatorActor): Promise<void> {
    const rows = await this.#deps.db.selectFrom('partners').select('id').where('managed_by', '=', source).execute();
    for (const { id } of rows)
      await this.#change(id, 'partner.update', who, (row) => (row.managed_by === source ? { managed_by: null } : undefined));
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
    also?: (trx: PartnerServiceDb) => Promise<void>,
  ): Promise<Partner> {
    const { db, clock, cache } = this.#deps;
    const now = clock.now();
    const result = await db.transaction().execute(async (trx) => {
      const row = await findPartnerForUpdate(trx, id);
      if (!row) throw notFound(`Partner ${id}`);
      const changes = decide(row, now);
      if (changes === undefined) return toPartner(row, now.getTime());
      // A partner whose prefix already overlaps another's (an earlier version's) keeps it until it changes.
      if (changes.customer_prefix !== undefined && changes.customer_prefix !== row.customer_prefix) {
        await lockCustomerPrefixes(trx);
        await assertPrefixFree(trx, changes.customer_prefix, id);
      }
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

/** The partner settings a Partner resource manages, by the name the operator API and CLI use. */
function managedFieldsOf(request: UpdatePartnerRequest): string[] {
  const fields: string[] = [];
  if (request.display_name !== undefined) fields.push('display_name');
  if (request.scopes !== undefined) fields.push('scopes');
  for (const key of [
    'max_customers',
    'max_projects_per_customer',
    'max_open_operations',
    'rate_limit_per_minute',
    'rate_limit_burst',
  ] as const)
    if (request.limits?.[key] !== undefined) fields.push(`limits.${key}`);
  if (request.defaults?.plan_id !== undefined) fields.push('defaults.plan_id');
  if (request.defaults?.project !== undefined) fields.push('defaults.project');
  if (request.customer_prefix !== undefined) fields.push('customer_prefix');
  if (request.portal_url !== undefined) fields.push('portal_url');
  if (request.contact_email !== undefined) fields.push('contact_email');
  return fields;
}

/** 409 CONFLICT when a managed partner's managed fields would change through the operator API. */
function refuseManaged(row: PartnerRow, fields: string[]): void {
  if (row.managed_by === null || fields.length === 0) return;
  const [namespace, name] = row.managed_by.split('/');
  throw new ApiError(
    'CONFLICT',
    `Partner ${row.id} is managed by the Kubernetes resource partners.kube-dc.com/${name} in namespace ${namespace}: change ${fields.join(', ')} there (kubectl edit partners.kube-dc.com ${name} -n ${namespace}). Keys are still managed here.`,
    { details: { managed_by: row.managed_by, fields } },
  );
}

function audit(who: OperatorActor, at: Date, action: string, partnerId: string) {
  return { actor: who.actor, requestId: who.requestId, at, action, partnerId, target: `partner/${partnerId}` };
}
