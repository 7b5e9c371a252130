import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ApiError } from '../errors/catalogue.ts';

/** Who made an operator request, as the audit log records it. */
export interface OperatorActor {
  actor: string;
  requestId: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    operator?: OperatorActor;
  }
}

const ACTOR_PATTERN = /^[A-Za-z0-9._@-]{1,64}$/;

/**
 * The operator API's one credential: the operator token, compared in constant
 * time. The optional `X-Tenantry-Actor` header (the CLI sends the local user
 * name) is recorded in the audit log as `operator:<name>`.
 */
export const operatorAuthPlugin = fp(
  async (app: FastifyInstance, opts: { token: string }) => {
    const expected = digest(opts.token);
    app.addHook('onRequest', async (request) => {
      if (request.routeOptions.config.public === true) return;
      const header = request.headers.authorization ?? '';
      const presented = header.toLowerCase().startsWith('bearer ') ? header.slice(7).trim() : '';
      if (!presented) throw new ApiError('UNAUTHORIZED', 'Send the operator token as "Authorization: Bearer <token>".');
      if (!timingSafeEqual(digest(presented), expected)) {
        throw new ApiError('UNAUTHORIZED', "The operator token was refused: it is not this server's operator token.");
      }
      const actorHeader = request.headers['x-tenantry-actor'];
      const name = typeof actorHeader === 'string' && ACTOR_PATTERN.test(actorHeader) ? actorHeader : undefined;
      request.operator = { actor: name ? `operator:${name}` : 'operator', requestId: request.id };
    });
  },
  { name: 'tenantry-operator-auth' },
);

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Operator routes that need no token (health checks). */
    public?: boolean;
  }
}

export function operatorOf(request: { operator?: OperatorActor }): OperatorActor {
  if (!request.operator) throw new Error('operator route reached without authentication');
  return request.operator;
}

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();
