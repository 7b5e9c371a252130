import type { FastifyInstance } from 'fastify';
import { type Static, Type } from 'typebox';
import type { Services } from '../app/services.ts';
import { AuditEntry, AuditQuery } from '../audit/schemas.ts';
import { listAudit } from '../audit/store.ts';
import { ApiKey, IssuedKey, IssueKeyRequest } from '../auth/keys-schemas.ts';
import { PageQuery, PaginationSchema } from '../infra/pagination/cursor.ts';
import { CreatePartnerRequest, Partner, PartnerId, UpdatePartnerRequest } from '../partners/schemas.ts';
import { operatorOf } from './operator-auth.ts';

const success = <T extends Parameters<typeof Type.Object>[0][string]>(data: T) => Type.Object({ status: Type.Literal('success'), data });
const list = <T extends Parameters<typeof Type.Object>[0][string]>(item: T) =>
  Type.Object({ status: Type.Literal('success'), data: Type.Array(item), pagination: PaginationSchema });

const PartnerParams = Type.Object({ id: PartnerId }, { additionalProperties: false });
const KeyParams = Type.Object({ id: PartnerId, kid: Type.String({ pattern: '^[a-z2-7]{12}$' }) }, { additionalProperties: false });
const ListQuery = Type.Object(PageQuery, { additionalProperties: false });

/** The operator API (CONTRACT §3): partners, their keys, and the audit log. Every change is audited by its service. */
export async function operatorRoutes(app: FastifyInstance, opts: { services: Services }): Promise<void> {
  const { partners, keys, cursors, options } = opts.services;
  const ok = <T>(data: T) => ({ status: 'success' as const, data });

  app.post('/partners', { schema: { body: CreatePartnerRequest, response: { 201: success(Partner) } } }, async (request, reply) => {
    const partner = await partners.create(request.body as Static<typeof CreatePartnerRequest>, operatorOf(request));
    return reply.code(201).send(ok(partner));
  });

  app.get('/partners', { schema: { querystring: ListQuery, response: { 200: list(Partner) } } }, async (request) => {
    const query = request.query as Static<typeof ListQuery>;
    return { status: 'success' as const, ...(await partners.list({ limit: query.limit ?? 50, cursor: query.cursor })) };
  });

  app.get('/partners/:id', { schema: { params: PartnerParams, response: { 200: success(Partner) } } }, async (request) =>
    ok(await partners.get((request.params as Static<typeof PartnerParams>).id)),
  );

  app.patch(
    '/partners/:id',
    { schema: { params: PartnerParams, body: UpdatePartnerRequest, response: { 200: success(Partner) } } },
    async (request) =>
      ok(
        await partners.update(
          (request.params as Static<typeof PartnerParams>).id,
          request.body as Static<typeof UpdatePartnerRequest>,
          operatorOf(request),
        ),
      ),
  );

  app.post('/partners/:id/suspend', { schema: { params: PartnerParams, response: { 200: success(Partner) } } }, async (request) =>
    ok(await partners.suspend((request.params as Static<typeof PartnerParams>).id, operatorOf(request))),
  );

  app.post('/partners/:id/unsuspend', { schema: { params: PartnerParams, response: { 200: success(Partner) } } }, async (request) =>
    ok(await partners.unsuspend((request.params as Static<typeof PartnerParams>).id, operatorOf(request))),
  );

  app.post(
    '/partners/:id/keys',
    { schema: { params: PartnerParams, body: Type.Optional(IssueKeyRequest), response: { 201: success(IssuedKey) } } },
    async (request, reply) => {
      const { id } = request.params as Static<typeof PartnerParams>;
      const issued = await keys.issue(id, (request.body ?? {}) as Static<typeof IssueKeyRequest>, operatorOf(request));
      return reply.code(201).header('cache-control', 'no-store').send(ok(issued));
    },
  );

  app.get('/partners/:id/keys', { schema: { params: PartnerParams, response: { 200: success(Type.Array(ApiKey)) } } }, async (request) =>
    ok(await keys.list((request.params as Static<typeof PartnerParams>).id)),
  );

  app.post('/partners/:id/keys/:kid/revoke', { schema: { params: KeyParams, response: { 200: success(ApiKey) } } }, async (request) => {
    const { id, kid } = request.params as Static<typeof KeyParams>;
    return ok(await keys.revoke(id, kid, operatorOf(request)));
  });

  app.get('/audit', { schema: { querystring: AuditQuery, response: { 200: list(AuditEntry) } } }, async (request) => {
    const query = request.query as Static<typeof AuditQuery>;
    const page = await listAudit(options.database.db, cursors, { partner: query.partner, limit: query.limit ?? 50, cursor: query.cursor });
    return { status: 'success' as const, ...page };
  });
}
