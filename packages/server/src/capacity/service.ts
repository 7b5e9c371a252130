import { writeAudit } from '../audit/service.ts';
import type { AuditTables } from '../audit/tables.ts';
import type { Tenant } from '../auth/tenant.ts';
import type { Clock } from '../infra/clock.ts';
import type { Db } from '../infra/db/handle.ts';
import { validationError } from '../infra/errors/catalogue.ts';
import type { OperatorActor } from '../infra/http/operator-auth.ts';
import type { KeyMode } from '../infra/mode.ts';
import { type CursorCodec, type Page, toPage } from '../infra/pagination/cursor.ts';
import { requirePartner } from '../partners/service.ts';
import type { PartnerTables } from '../partners/tables.ts';
import { toPlan } from './quotas.ts';
import { amountIn, dimensionNames, normalize, type Resources, ZERO } from './resources.ts';
import type { Capacity, PartnerCapacity, Plan, SetCapacityRequest, SetPlanRequest } from './schemas.ts';
import { type CapacitySettings, capacitySettings, findPlan, listGpuProfiles, saveCapacitySettings } from './store.ts';
import type { CapacityTables } from './tables.ts';

/** The capacity service also reads partners and writes the audit log. */
type CapacityDb = Db<CapacityTables & PartnerTables & AuditTables>;

/**
 * The plan catalogue, GPU profiles and partners' capacity pools: the operator sets them (CONTRACT §3,
 * audited), partners read them (`GET /catalog/plans`, `GET /capacity`).
 */
export class CapacityService {
  readonly #db: CapacityDb;
  readonly #clock: Clock;
  readonly #cursors: CursorCodec;

  constructor(deps: { db: CapacityDb; clock: Clock; cursors: CursorCodec }) {
    this.#db = deps.db;
    this.#clock = deps.clock;
    this.#cursors = deps.cursors;
  }

  /** `GET /catalog/plans`: the plans the partner may assign, by id. */
  async catalog(tenant: Tenant, query: { limit: number; cursor?: string | undefined }): Promise<Page<Plan>> {
    const settings = await capacitySettings(this.#db, tenant.partnerId);
    const cursors = this.#cursors.scoped(tenant);
    let select = this.#db
      .selectFrom('plans')
      .selectAll()
      .orderBy('id')
      .limit(query.limit + 1);
    if (settings.plans.length === 0) return { data: [], pagination: { next_cursor: null, limit: query.limit } };
    select = select.where('id', 'in', settings.plans);
    if (query.cursor !== undefined) {
      const [last] = cursors.decode(query.cursor, 'plan-catalog', {});
      select = select.where('id', '>', String(last));
    }
    const rows = await select.execute();
    return toPage(rows, query.limit, toPlan, (row) => cursors.encode('plan-catalog', {}, [row.id]));
  }

  /** `GET /capacity`: the pool of the token's mode, the per-customer maximum and the grantable profiles. */
  async capacity(tenant: Tenant): Promise<Capacity> {
    const settings = await capacitySettings(this.#db, tenant.partnerId);
    const allocated = await this.#allocated(tenant.partnerId, tenant.mode);
    const profiles = await listGpuProfiles(this.#db);
    const dimension = (name: string) => {
      const total = amountIn(settings.pool, name);
      const held = amountIn(allocated, name);
      return { total, allocated: held, available: Math.max(0, total - held) };
    };
    const gpuNames = dimensionNames(settings.pool, allocated).filter((d) => d.startsWith('gpus.'));
    return {
      pool: {
        vcpu: dimension('vcpu'),
        memory_gib: dimension('memory_gib'),
        storage_gib: dimension('storage_gib'),
        gpus: Object.fromEntries(gpuNames.map((d) => [d.slice(5), dimension(d)])),
      },
      per_customer_max: normalize(settings.perCustomerMax),
      gpu_profiles: profiles.filter((p) => settings.gpuProfiles.includes(p.name)),
    };
  }

  // Operator side.

  async listPlans(): Promise<Plan[]> {
    return (await this.#db.selectFrom('plans').selectAll().orderBy('id').execute()).map(toPlan);
  }

  /** `tenantry plans set`: creates or replaces a plan. Customers keep their quota until their plan is set again. */
  async setPlan(id: string, request: SetPlanRequest, who: OperatorActor): Promise<Plan> {
    await this.#assertProfiles(Object.keys(request.quota.gpus), 'quota.gpus');
    const now = this.#clock.now();
    return this.#db.transaction().execute(async (trx) => {
      const before = await findPlan(trx, id);
      const values = { display_name: request.display_name, quota: JSON.stringify(normalize(request.quota)), updated_at: now };
      const row = await trx
        .insertInto('plans')
        .values({ id, ...values, created_at: now })
        .onConflict((oc) => oc.column('id').doUpdateSet(values))
        .returningAll()
        .executeTakeFirstOrThrow();
      const after = toPlan(row);
      await writeAudit(trx, { ...audit(who, now, 'plan.set', null, `plan/${id}`), before: before ? toPlan(before) : null, after });
      return after;
    });
  }

  async partnerCapacity(partnerId: string): Promise<PartnerCapacity> {
    await this.#requirePartner(partnerId);
    const settings = await capacitySettings(this.#db, partnerId);
    return this.#view(partnerId, settings);
  }

  /** `tenantry partners plans`: which plans the partner may assign (replaces the list). */
  async setPartnerPlans(partnerId: string, plans: string[], who: OperatorActor): Promise<PartnerCapacity> {
    const known = new Set((await this.#db.selectFrom('plans').select('id').execute()).map((p) => p.id));
    const unknown = plans.map((id, index) => ({ id, index })).filter((p) => !known.has(p.id));
    if (unknown.length > 0) {
      throw validationError(
        unknown.map((p) => ({ in: 'body' as const, field: `plans.${p.index}`, message: `no plan ${p.id} in the catalogue` })),
        undefined,
        { known_plans: [...known].sort() },
      );
    }
    return this.#update(partnerId, 'partner.plans', who, (s) => ({ ...s, plans: [...new Set(plans)].sort() }));
  }

  /** `tenantry gpu-profiles set`: which GPU profiles the partner may grant (replaces the list). */
  async setGpuProfiles(partnerId: string, profiles: string[], who: OperatorActor): Promise<PartnerCapacity> {
    await this.#assertProfiles(profiles, 'profiles');
    return this.#update(partnerId, 'partner.gpu_profiles', who, (s) => ({ ...s, gpuProfiles: [...new Set(profiles)].sort() }));
  }

  /** `tenantry capacity set`: the pool and the per-customer maximum; what is not given keeps its value. */
  async setCapacity(partnerId: string, request: SetCapacityRequest, who: OperatorActor): Promise<PartnerCapacity> {
    await this.#assertProfiles([...Object.keys(request.pool?.gpus ?? {}), ...Object.keys(request.per_customer_max?.gpus ?? {})], 'gpus');
    const merge = (current: Resources, change: Partial<Resources> | undefined): Resources =>
      normalize({ ...current, ...change, gpus: { ...current.gpus, ...change?.gpus } });
    return this.#update(partnerId, 'partner.capacity', who, (s) => ({
      ...s,
      pool: merge(s.pool, request.pool),
      perCustomerMax: merge(s.perCustomerMax, request.per_customer_max),
    }));
  }

  async #update(
    partnerId: string,
    action: string,
    who: OperatorActor,
    change: (settings: CapacitySettings) => CapacitySettings,
  ): Promise<PartnerCapacity> {
    await this.#requirePartner(partnerId);
    const now = this.#clock.now();
    return this.#db.transaction().execute(async (trx) => {
      // The partner row serialises operator changes of one partner.
      await trx.selectFrom('partners').select('id').where('id', '=', partnerId).forUpdate().execute();
      const settings = await capacitySettings(trx, partnerId);
      const next = change(settings);
      await saveCapacitySettings(trx, partnerId, next, now);
      const before = await this.#view(partnerId, settings, trx);
      const after = await this.#view(partnerId, next, trx);
      await writeAudit(trx, { ...audit(who, now, action, partnerId, `partner/${partnerId}`), before, after });
      return after;
    });
  }

  async #view(partnerId: string, settings: CapacitySettings, db: CapacityDb = this.#db): Promise<PartnerCapacity> {
    return {
      partner_id: partnerId,
      pool: normalize(settings.pool),
      per_customer_max: normalize(settings.perCustomerMax),
      allocated: { live: await this.#allocated(partnerId, 'live', db), test: await this.#allocated(partnerId, 'test', db) },
      plans: settings.plans,
      gpu_profiles: settings.gpuProfiles,
    };
  }

  async #allocated(partnerId: string, mode: KeyMode, db: CapacityDb = this.#db): Promise<Resources> {
    const row = await db
      .selectFrom('capacity_allocations')
      .select('allocated')
      .where('partner_id', '=', partnerId)
      .where('mode', '=', mode)
      .executeTakeFirst();
    return normalize(row?.allocated ?? ZERO);
  }

  async #requirePartner(partnerId: string): Promise<void> {
    await requirePartner(this.#db, partnerId);
  }

  async #assertProfiles(profiles: string[], field: string): Promise<void> {
    const known = new Set((await listGpuProfiles(this.#db)).map((p) => p.name));
    const unknown = profiles.filter((p) => !known.has(p));
    if (unknown.length > 0) {
      throw validationError(
        unknown.map((p) => ({ in: 'body' as const, field, message: `no GPU profile ${p} in the catalogue` })),
        undefined,
        { known_gpu_profiles: [...known].sort() },
      );
    }
  }
}

function audit(who: OperatorActor, at: Date, action: string, partnerId: string | null, target: string) {
  return { actor: who.actor, requestId: who.requestId, at, action, partnerId, target };
}
