import type { Tenant } from '../auth/tenant.ts';
import type { Db } from '../infra/db/handle.ts';
import { validationError } from '../infra/errors/catalogue.ts';
import { type CursorCodec, type Page, toPage } from '../infra/pagination/cursor.ts';
import { type EventBody, toEventBody } from './schemas.ts';
import { EVENT_TYPES, type EventType, recordEvent as insertEvent, type NewEvent, onEventsRecorded } from './store.ts';
import type { EventTables } from './tables.ts';

/** CONTRACT §4, Events: event bodies are kept 30 days. */
export const EVENT_RETENTION_MS = 30 * 24 * 60 * 60 * 1000;

/**
 * Records an event in the caller's transaction, the one that made the change it reports (the outbox):
 * the change and its event commit together or not at all. Answers the event's id.
 */
export function recordEvent<T extends EventType>(trx: Db<EventTables>, event: NewEvent<T>): Promise<string> {
  return insertEvent(trx, event);
}

/** `GET /events`: the polling twin of every webhook. */
export class EventService {
  readonly #db: Db<EventTables>;
  readonly #cursors: CursorCodec;

  constructor(deps: { db: Db<EventTables>; cursors: CursorCodec }) {
    this.#db = deps.db;
    this.#cursors = deps.cursors;
  }

  async list(tenant: Tenant, query: { limit: number; cursor?: string | undefined; type?: string | undefined }): Promise<Page<EventBody>> {
    const { type } = query;
    if (type !== undefined && !(EVENT_TYPES as readonly string[]).includes(type)) {
      throw validationError([{ in: 'query', field: 'type', message: 'is not an event name; details.known_events lists them' }], undefined, {
        known_events: [...EVENT_TYPES],
      });
    }
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

  /**
   * Calls `listener` after each commit that recorded events (the webhook dispatcher wakes on it).
   * Returns the function that stops the calls.
   */
  onRecorded(listener: () => void): () => void {
    return onEventsRecorded(listener);
  }

  /** Drops event bodies older than the retention (their deliveries ended long before). */
  async deleteExpired(now: Date): Promise<void> {
    await this.#db
      .deleteFrom('events')
      .where('created_at', '<', new Date(now.getTime() - EVENT_RETENTION_MS))
      .where('delivery_state', '!=', 'pending')
      .execute();
  }
}
