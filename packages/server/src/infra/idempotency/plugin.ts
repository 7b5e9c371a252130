import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import { ApiError, ERROR_CATALOGUE, type ErrorCode, validationError } from '../errors/catalogue.ts';
import { appendRouteHook } from '../http/route-hooks.ts';
import { type PendingAnswer, withPendingAnswer } from './answer.ts';
import { claimKey, completeKey, IDEMPOTENCY_LEASE_MS, type IdempotencyScope, releaseKey, releaseRunningKeys } from './store.ts';
import type { IdempotencyTables } from './tables.ts';

/** This module's own tables: infrastructure knows no domain module's. */
type Db = Kysely<IdempotencyTables>;

declare module 'fastify' {
  interface FastifyRequest {
    idempotency?: IdempotencyScope;
    /** The success answer the command's transaction writes with its effect (`answerWith`). */
    idempotentAnswer?: PendingAnswer;
  }
  interface FastifyContextConfig {
    /** A route whose answer carries a secret says how its replays keep it out of storage. */
    idempotentReplay?: IdempotentReplay;
  }
}

/**
 * How a route's stored answer differs from the one sent: a secret in an answer is not kept at rest
 * (`store` takes it out), and a replay decides what it may hand back now (`replay`).
 */
export interface IdempotentReplay {
  store(body: string): string;
  replay(request: FastifyRequest, stored: string): Promise<string>;
}

const MUTATING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** 1 to 255 visible ASCII characters; the OpenAPI document gives the header this pattern. */
export const KEY_PATTERN = /^[!-~]{1,255}$/;

/**
 * `Idempotency-Key` on authenticated mutating calls (partner-api.md,
 * Conventions). Runs after authentication and validation, so a malformed
 * request never consumes a key. A success is written by the transaction of the
 * command that makes its effect (`answerWith`), so after any crash the key has
 * either no effect and no answer (it runs again) or both; any other answer is
 * written before the response leaves, so a replay is never older than what the
 * client saw. A 5xx is not stored: the client may retry it with the same key.
 */
export const idempotencyPlugin = fp(
  async (app: FastifyInstance, opts: { db: Db; clock: Clock; exclusive: boolean }) => {
    const { db, clock } = opts;
    // The only process on its database: a key still running was left by a predecessor that died with
    // its request unanswered and its effect uncommitted (an effect commits with its answer), so a retry
    // may run it again now rather than when the key's lease runs out.
    if (opts.exclusive) await releaseRunningKeys(db);
    const unreleased = unreleasedClaims(db, clock);
    app.addHook('onClose', async () => unreleased.stop());

    /** `statusCode`: the route's one success status, read from its schema when the route is added. */
    const claim = async (request: FastifyRequest, reply: FastifyReply, statusCode: number | undefined) => {
      const header = request.headers['idempotency-key'];
      if (header === undefined || !request.principal) return;
      if (typeof header !== 'string' || !KEY_PATTERN.test(header)) {
        throw validationError([
          { in: 'header', field: 'idempotency-key', message: 'must be 1 to 255 visible ASCII characters, sent once' },
        ]);
      }
      const { claims } = request.principal;
      const scope: IdempotencyScope = { partnerId: claims.partnerId, mode: claims.mode, key: header };
      const fingerprint = createHash('sha256')
        .update(`${request.method} ${request.url}\n${canonicalJson(request.body ?? null)}`)
        .digest('hex');
      let result: Awaited<ReturnType<typeof claimKey>>;
      try {
        result = await claimKey(db, scope, fingerprint, request.id, clock.now());
      } catch (error) {
        // The claim may have committed with its acknowledgement lost (a failover): released once the
        // database answers, it does not hold the key's retries off for its whole lease.
        unreleased.add(scope, request.id);
        throw error;
      }
      switch (result.kind) {
        case 'claimed': {
          request.idempotency = scope;
          if (statusCode === undefined) return;
          const replay = request.routeOptions.config.idempotentReplay;
          request.idempotentAnswer = {
            scope,
            requestId: request.id,
            render: (data) => {
              // The route's own serialiser for its success status: the bytes `send` writes.
              const sent = String(reply.serializeInput({ status: 'success', data }, String(statusCode)));
              return { statusCode, sent, stored: replay ? replay.store(sent) : sent };
            },
          };
          return;
        }
        case 'reused':
          throw new ApiError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was already used with a different request.', {
            details: { idempotency_key: header },
          });
        case 'in_progress':
          throw new ApiError('IDEMPOTENCY_KEY_IN_PROGRESS', 'The first request with this Idempotency-Key is still running.', {
            retryAfter: 1,
            details: { idempotency_key: header },
          });
        case 'replay': {
          const replay = request.routeOptions.config.idempotentReplay;
          const body = replay && result.statusCode < 300 ? await replay.replay(request, result.body) : result.body;
          reply
            .code(result.statusCode)
            .header('x-request-id', result.requestId)
            .header('idempotent-replayed', 'true')
            .type('application/json; charset=utf-8');
          return reply.send(body);
        }
      }
    };

    const store = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
      const scope = request.idempotency;
      if (!scope) return payload;
      request.idempotency = undefined;
      const body = typeof payload === 'string' ? payload : String(payload ?? '');
      const committed = request.idempotentAnswer?.committed;
      if (committed !== undefined) {
        // The effect committed with its answer: that answer is the key's, whatever happened after.
        if (reply.statusCode < 300 && body !== committed) {
          request.log.error({ request_id: request.id, route: request.routeOptions.url }, 'the answer sent differs from the one committed');
        }
        return payload;
      }
      if (reply.statusCode >= 500 || isRetryableError(reply.statusCode, body)) {
        // The spec says retry these (same key): the retry must run again, not replay the refusal. A key
        // that cannot be released now (the database is away too) is released once it answers again.
        try {
          await releaseKey(db, scope, request.id);
        } catch (error) {
          const reason = String((error as Error).message).slice(0, 200);
          request.log.warn({ request_id: request.id, reason }, 'idempotency key not released yet');
          unreleased.add(scope, request.id);
        }
        return payload;
      }
      const replay = request.routeOptions.config.idempotentReplay;
      const stored = replay && reply.statusCode < 300 ? replay.store(body) : body;
      try {
        await completeKey(db, scope, request.id, reply.statusCode, stored);
      } catch {
        // One more try; if that fails too, the answer becomes 503 UNAVAILABLE (route-hooks.ts) and the key's lease lets a retry run.
        await completeKey(db, scope, request.id, reply.statusCode, stored);
      }
      return payload;
    };

    // Attached to mutating routes only: reads never pay for idempotency.
    app.addHook('onRoute', (route) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      if (!methods.some((method) => MUTATING.has(method))) return;
      const statusCode = successStatus(route.schema?.response);
      appendRouteHook(route, 'preHandler', (request: FastifyRequest, reply: FastifyReply) => claim(request, reply, statusCode));
      appendRouteHook(route, 'onSend', store);
      const handler = route.handler;
      route.handler = function idempotent(this: FastifyInstance, request, reply) {
        const answer = request.idempotentAnswer;
        return answer ? withPendingAnswer(answer, () => handler.call(this, request, reply)) : handler.call(this, request, reply);
      };
    });
  },
  { name: 'tenantry-idempotency' },
);

/** The one 2xx status a route's schema declares; undefined when it declares none or several. */
function successStatus(response: unknown): number | undefined {
  const statuses = Object.keys(response ?? {}).filter((status) => /^2\d\d$/.test(status));
  return statuses.length === 1 ? Number(statuses[0]) : undefined;
}

/** A catalogue error the partner is told to retry (BUSY, NOT_READY, RATE_LIMITED, ...). */
function isRetryableError(statusCode: number, body: string): boolean {
  if (statusCode < 400) return false;
  try {
    const code = (JSON.parse(body) as { error?: { code?: string } }).error?.code;
    return code !== undefined && code in ERROR_CATALOGUE && ERROR_CATALOGUE[code as ErrorCode].retryable;
  } catch {
    return false;
  }
}

/** JSON with object keys sorted, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are one request. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** The most claims a process keeps trying to release; beyond it, their lease frees them. */
const MAX_UNRELEASED = 10_000;
const RELEASE_RETRY_MS = 500;

/**
 * Claims of failed requests that could not be released when they failed (the database was away too):
 * tried again every half second, so that a retry after a 503 runs as soon as the database is back rather
 * than when the claim's lease runs out. A claim is given up when its lease has run out anyway.
 */
function unreleasedClaims(db: Db, clock: Clock) {
  const claims = new Map<string, { scope: IdempotencyScope; requestId: string; untilMs: number }>();
  let timer: NodeJS.Timeout | undefined;
  const retry = async () => {
    for (const [id, claim] of claims) {
      if (claim.untilMs <= clock.nowMs()) {
        claims.delete(id);
        continue;
      }
      try {
        await releaseKey(db, claim.scope, claim.requestId);
        claims.delete(id);
      } catch {
        break; // Still away: all of them later.
      }
    }
    timer = claims.size > 0 ? setTimeout(retry, RELEASE_RETRY_MS).unref() : undefined;
  };
  return {
    add(scope: IdempotencyScope, requestId: string) {
      if (claims.size >= MAX_UNRELEASED) return;
      claims.set(`${scope.partnerId}\0${scope.mode}\0${scope.key}`, { scope, requestId, untilMs: clock.nowMs() + IDEMPOTENCY_LEASE_MS });
      timer ??= setTimeout(retry, RELEASE_RETRY_MS).unref();
    },
    stop() {
      clearTimeout(timer);
      claims.clear();
    },
  };
}
