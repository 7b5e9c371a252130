import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { AuditEntry, AuditQuery } from '../audit/schemas.ts';
import { listAudit } from '../audit/service.ts';
import type { AuditTables } from '../audit/tables.ts';
import { ApiKey, IssuedKey, IssueKeyRequest } from '../auth/keys-schemas.ts';
import type { KeyService } from '../auth/keys-service.ts';
import type { Db } from '../infra/db/handle.ts';
import { listOf as list, ok, success } from '../infra/http/envelope.ts';
import { operatorOf } from '../infra/http/operator-auth.ts';
import { type CursorCodec, PageQuery } from '../infra/pagination/cursor.ts';
import { CreatePartnerRequest, Partner, PartnerId, UpdatePartnerRequest } from '../partners/schemas.ts';
import type { PartnerService } from '../partners/service.ts';

const PartnerParams = Type.Object({ id: PartnerId }, { additionalProperties: false });
const KeyParams = Type.Object({ id: PartnerId, kid: Type.String({ pattern: '^[a-z2-7]{12}$' }) }, { additionalProperties: false });
const ListQuery = Type.Object(PageQuery, { additionalProperties: false });

/** What these routes use of the services the composition root wires. */
interface RouteServices {
  partners: PartnerService;
  keys: KeyService;
  cursors: CursorCodec;
  /** The audit log is read from its table: every service writes it, none owns reading it. */
  options: { database: { db: Db<AuditTables> } };
}

/** The operator API (CONTRACT §3): partners, their keys, and the audit log. Every change is audited by its service. */
export const operatorRoutes: FastifyPluginAsyncTypebox<{ services: RouteServices }> = async (app, { services }) => {
  const { partners, keys, cursors, options } = services;

  app.post('/partners', { schema: { body: CreatePartnerRequest, response: { 201: success(Partner) } } }, async (request, reply) =>
    reply.code(201).send(ok(await partners.create(request.body, operatorOf(request)))),
  );

  app.get('/partners', { schema: { querystring: ListQuery, response: { 200: list(Partner) } } }, async (request) => ({
    status: 'success' as const,
    ...(await partners.list({ limit: request.query.limit ?? 50, cursor: request.query.cursor })),
  }));

  app.get('/partners/:id', { schema: { params: PartnerParams, response: { 200: success(Partner) } } }, async (request) =>
    ok(await partners.get(request.params.id)),
  );

  app.patch(
    '/partners/:id',
    { schema: { params: PartnerParams, body: UpdatePartnerRequest, response: { 200: success(Partner) } } },
    async (request) => ok(await partners.update(request.params.id, request.body, operatorOf(request))),
  );

  app.post('/partners/:id/suspend', { schema: { params: PartnerParams, response: { 200: success(Partner) } } }, async (request) =>
    ok(await partners.suspend(request.params.id, operatorOf(request))),
  );

  app.post('/partners/:id/unsuspend', { schema: { params: PartnerParams, response: { 200: success(Partner) } } }, async (request) =>
    ok(await partners.unsuspend(request.params.id, operatorOf(request))),
  );

  app.post(
    '/partners/:id/keys',
    { schema: { params: PartnerParams, body: Type.Optional(IssueKeyRequest), response: { 201: success(IssuedKey) } } },
    async (request, reply) => {
      const issued = await keys.issue(request.params.id, request.body ?? {}, operatorOf(request));
      return reply.code(201).header('cache-control', 'no-store').send(ok(issued));
    },
  );

  app.get('/partners/:id/keys', { schema: { params: PartnerParams, response: { 200: success(Type.Array(ApiKey)) } } }, async (request) =>
    ok(await keys.list(request.params.id)),
  );

  app.post('/partners/:id/keys/:kid/revoke', { schema: { params: KeyParams, response: { 200: success(ApiKey) } } }, async (request) =>
    ok(await keys.revoke(request.params.id, request.params.kid, operatorOf(request))),
  );

  app.get('/audit', { schema: { querystring: AuditQuery, response: { 200: list(AuditEntry) } } }, async (request) => {
    const { partner, limit, cursor } = request.query;
    return {
      status: 'success' as const,
      ...(await listAudit(options.database.db, cursors.scoped('operator'), { partner, limit: limit ?? 50, cursor })),
    };
  });
};
