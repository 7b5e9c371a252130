import type { FastifyPluginAsync } from 'fastify';
import { sql } from 'kysely';
import { Type } from 'typebox';
import type { Services } from '../src/app/services.ts';
import { principalOf } from '../src/auth/authenticate.ts';
import { ApiError, notFound } from '../src/infra/errors/catalogue.ts';
import { answerWith } from '../src/infra/idempotency/answer.ts';
import { PageQuery, toPage } from '../src/infra/pagination/cursor.ts';

/**
 * Fixture routes for the cross-cutting suites. Issue 2 ships no partner
 * resource yet, so these stand in for "a mutating route" and "a list": they go
 * through exactly the machinery later routes use (authentication, scopes,
 * rate limits, idempotency, validation, pagination) and write real rows.
 */
export interface FixtureControl {
  /** Resolves the pending `POST /test-fixtures/slow` requests. */
  releaseSlow(): void;
  /** Resolves when the first `POST /test-fixtures/slow` request reaches its handler. */
  slowStarted: Promise<void>;
  /** Resolves when the next such request (after this call) reaches its handler, past authentication and idempotency. */
  nextSlowStart(): Promise<void>;
  /** Resolves when a `POST /test-fixtures/effects-then-hang` request has committed its effect (it then answers nothing until released). */
  nextHangAfterCommit(): Promise<void>;
  /** Ends the hanging requests with an error, as a process would that died after its commit. */
  releaseHung(): void;
}

export function fixtureRoutes(): { routes: FastifyPluginAsync<{ services: Services }>; control: FixtureControl } {
  let release: () => void = () => {};
  let gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  let started: () => void = () => {};
  const slowStarted = new Promise<void>((resolve) => {
    started = resolve;
  });
  let waiting: (() => void)[] = [];
  let committedWaiting: (() => void)[] = [];
  let hung: (() => void)[] = [];
  const control: FixtureControl = {
    releaseHung: () => {
      for (const end of hung) end();
      hung = [];
    },
    nextHangAfterCommit: () => new Promise<void>((resolve) => committedWaiting.push(resolve)),
    releaseSlow: () => {
      release();
      gate = new Promise<void>((resolve) => {
        release = resolve;
      });
    },
    slowStarted,
    nextSlowStart: () => new Promise<void>((resolve) => waiting.push(resolve)),
  };

  const routes: FastifyPluginAsync<{ services: Services }> = async (app, { services }) => {
    const db = services.options.database.db;
    await sql`create table if not exists fixture_effects (id serial primary key, partner_id text not null, mode text not null, name text not null)`.execute(
      db,
    );
    await sql`create table if not exists fixture_items (partner_id text not null, mode text not null, name text not null, color text not null, primary key (partner_id, mode, name))`.execute(
      db,
    );

    const EffectBody = Type.Object(
      { name: Type.String({ minLength: 1, maxLength: 40 }), note: Type.Optional(Type.String()) },
      { additionalProperties: false },
    );
    const EffectAnswer = {
      201: Type.Object({ status: Type.Literal('success'), data: Type.Object({ id: Type.Number(), name: Type.String() }) }),
    };
    /** A command as the modules write them: the effect and the idempotent answer in one transaction. */
    const effect = (request: Parameters<typeof principalOf>[0] & { body: unknown }) => {
      const { claims } = principalOf(request);
      const body = request.body as { name: string };
      return db.transaction().execute(async (trx) => {
        const row = await sql<{
          id: number;
        }>`insert into fixture_effects (partner_id, mode, name) values (${claims.partnerId}, ${claims.mode}, ${body.name}) returning id`.execute(
          trx,
        );
        return answerWith(trx, { id: Number(row.rows[0]?.id), name: body.name });
      });
    };
    app.post(
      '/test-fixtures/effects',
      { config: { scope: 'customers:write' }, schema: { body: EffectBody, response: EffectAnswer } },
      async (request, reply) => reply.code(201).send({ status: 'success', data: await effect(request) }),
    );
    // The process dies (as far as the client can tell) between the commit and the answer.
    app.post(
      '/test-fixtures/effects-then-hang',
      { config: { scope: 'customers:write' }, schema: { body: EffectBody, response: EffectAnswer } },
      async (request) => {
        await effect(request);
        for (const resolve of committedWaiting) resolve();
        committedWaiting = [];
        await new Promise<void>((resolve) => hung.push(resolve));
        throw new Error('the fixture died after its commit');
      },
    );

    app.post('/test-fixtures/slow', { config: { scope: 'customers:write' } }, async () => {
      started();
      for (const resolve of waiting) resolve();
      waiting = [];
      await gate;
      return { status: 'success', data: { slow: true } };
    });

    let busyCalls = 0;
    app.post('/test-fixtures/busy-once', { config: { scope: 'customers:write' } }, async (_request, reply) => {
      busyCalls++;
      if (busyCalls === 1) throw new ApiError('BUSY', 'Another change holds the lock.', { retryAfter: 3 });
      return reply.code(201).send({ status: 'success', data: { calls: busyCalls } });
    });

    app.post('/test-fixtures/fail', { config: { scope: 'customers:write' } }, async () => {
      throw new Error('fixture failure with secret internals');
    });

    app.get('/test-fixtures/sso-only', { config: { scope: 'customers:sso' } }, async () => ({ status: 'success', data: {} }));
    app.get('/test-fixtures/usage-only', { config: { scope: 'usage:read' } }, async () => ({ status: 'success', data: {} }));

    const ItemsQuery = Type.Object(
      { color: Type.Optional(Type.Union([Type.Literal('red'), Type.Literal('blue')])), ...PageQuery },
      { additionalProperties: false },
    );
    const listItems = (list: string) => async (request: { query: unknown; principal?: unknown }) => {
      const { claims } = principalOf(request as Parameters<typeof principalOf>[0]);
      const query = request.query as { color?: string; limit?: number; cursor?: string };
      const limit = query.limit ?? 50;
      const filters = { color: query.color };
      const cursors = services.cursors.scoped(claims);
      const after = query.cursor ? String(cursors.decode(query.cursor, list, filters)[0]) : '';
      const rows = await sql<{ name: string; color: string }>`select name, color from fixture_items
        where partner_id = ${claims.partnerId} and mode = ${claims.mode}
          and (${query.color ?? null}::text is null or color = ${query.color ?? null})
          and name > ${after}
        order by name limit ${limit + 1}`.execute(db);
      return {
        status: 'success',
        ...toPage(
          rows.rows,
          limit,
          (r) => r,
          (last) => cursors.encode(list, filters, [last.name]),
        ),
      };
    };
    app.get('/test-fixtures/items', { config: { scope: 'customers:read' }, schema: { querystring: ItemsQuery } }, listItems('items'));
    app.get(
      '/test-fixtures/other-items',
      { config: { scope: 'customers:read' }, schema: { querystring: ItemsQuery } },
      listItems('other-items'),
    );

    app.get('/test-fixtures/items/:name', { config: { scope: 'customers:read' } }, async (request) => {
      const { claims } = principalOf(request);
      const { name } = request.params as { name: string };
      const rows = await sql<{
        name: string;
        color: string;
      }>`select name, color from fixture_items where partner_id = ${claims.partnerId} and mode = ${claims.mode} and name = ${name}`.execute(
        db,
      );
      const item = rows.rows[0];
      if (!item) throw notFound(`Item ${name}`);
      return { status: 'success', data: item };
    });
  };
  return { routes, control };
}
