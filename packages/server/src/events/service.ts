import type { Tenant } from '../auth/tenant.ts';
import type { Db } from '../infra/db/handle.ts';
import { type CursorCodec, type Page, toPage } from '../infra/pagination/cursor.ts';
import type { EventType, NewEvent, RecordedEvent } from './payloads.ts';
import { type EventBody, toEventBody } from './schemas.ts';
import { insertEvent } from './store.ts';
import type { EventTables } from './tables.ts';

/** CONTRACT §4, Events: event bodies are kept 30 days. */
export const EVENT_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;

/**
 * Told of each event in the transaction that records it, before that transaction commits: what it
 * writes commits with the event or not at all (the composition root wires the webhooks module here).
 */
export type EventRecordedListener = (trx: Db<EventTables>, event: RecordedEvent) => Promise<void>;

export interface EventServiceDeps {
  db: Db<EventTables>;
  cursors: CursorCodec;
  recorded: EventRecordedListener;
}

/** The record of what happened to a partner's customers: written with each change, read by `GET /events`. */
export class EventService {
  readonly #db: Db<EventTables>;
  readonly #cursors: CursorCodec;
  readonly #recorded: EventRecordedListener;

  constructor(deps: EventServiceDeps) {
    this.#db = deps.db;
    this.#cursors = deps.cursors;
    this.#recorded = deps.recorded;
  }

  /**
   * Records an event in the caller's transaction, the one that made the change it reports (the
   * outbox): the change and its event commit together or not at all, so no event is lost or recorded
   * twice. Answers the event's id.
   */
  async record<T extends EventType>(trx: Db<EventTables>, event: NewEvent<T>): Promise<string> {
    const recorded = await insertEvent(trx, event);
    await this.#recorded(trx, recorded);
    return recorded.id;
  }

  async list(
    tenant: Tenant,
    query: { limit: number; cursor?: string | undefined; type?: EventType | undefined },
  ): Promise<Page<EventBody>> {
    const { type } = query;
    const cursors = this.#cursors.scoped(tenant);
    const filters = { type };
    const since = new Date(tenant.now.getTime() - EVENT_RETENTION_MS);
    let select = this.#db
      .selectFrom('events')
      .select(['id', 'type', 'created_at', 'partner_id', 'data'])
      .where('partner_id', '=', tenant.partnerId)
      .where('mode', '=', tenant.mode)
      .where('created_at', '>=', since)
      .$if(type !== undefined, (q) => q.where('type', '=', type ?? ''))
      .orderBy('id', 'desc')
      .limit(query.limit + 1);
    if (query.cursor !== undefined) {
      const [lastId] = cursors.decode(query.cursor, 'events', filters);
      select = select.where('id', '<', String(lastId));
    }
    const rows = await select.execute();
    return toPage(rows, query.limit, toEventBody, (last) => cursors.encode('events', filters, [last.id]));
  }

  /** Drops event bodies older than the retention (a webhook delivery keeps its own copy). */
  async deleteExpired(now: Date): Promise<void> {
    await this.#db
      .deleteFrom('events')
      .where('created_at', '<', new Date(now.getTime() - EVENT_RETENTION_MS))
      .execute();
  }
}

/** What a module that records events needs of this service. */
export type EventRecorder = Pick<EventService, 'record'>;
