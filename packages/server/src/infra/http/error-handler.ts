import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnavailable } from '../db/database.ts';
import { ApiError, type ErrorDetails, type FieldProblem, validationError } from '../errors/catalogue.ts';
import { toFieldProblems } from './validation.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * What a route adds to the problems its schemas find: the words for a value outside a list the
     * route knows better (an unknown event name), and details beside `errors` (`known_events`).
     */
    explainValidation?: (problems: FieldProblem[], request: FastifyRequest) => { problems: FieldProblem[]; details?: ErrorDetails };
  }
}

/** Seconds a client should wait when a dependency (the database) is down. */
const UNAVAILABLE_RETRY_AFTER_S = 5;

interface ErrorEnvelope {
  status: 'error';
  error: { code: string; message: string; request_id: string; details?: Record<string, unknown> };
}

export function sendError(request: FastifyRequest, reply: FastifyReply, error: ApiError): FastifyReply {
  errorHeaders(reply, error);
  return reply.code(error.status).type('application/json; charset=utf-8').send(envelope(request, error));
}

function errorHeaders(reply: FastifyReply, error: ApiError): void {
  if (error.retryAfter !== undefined) reply.header('retry-after', String(Math.max(1, Math.ceil(error.retryAfter))));
  if (error.headers) reply.headers(error.headers);
}

function envelope(request: FastifyRequest, error: ApiError): ErrorEnvelope {
  const body: ErrorEnvelope = {
    status: 'error',
    error: { code: error.code, message: error.message, request_id: request.id },
  };
  if (error.details !== undefined) body.error.details = error.details;
  return body;
}

/**
 * Maps everything that can go wrong to the catalogue: our own errors pass
 * through, framework errors about the request become VALIDATION_ERROR, a
 * database that cannot be reached becomes 503 UNAVAILABLE, and anything else
 * is an INTERNAL_ERROR whose stack goes to the log only.
 */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((raw: FastifyError | ApiError | Error, request, reply) => sendError(request, reply, loggedAnswer(raw, request)));
}

/**
 * The answer when a route's `onSend` hook fails, as the payload that replaces the one chosen: the answer
 * is chosen by then, often by the error handler, and Fastify would hand the hook's error to its own
 * default handler, whose body is not the envelope and carries the error's own words. The status and
 * headers are set as the error handler sets them; those the route set (rate limits, request id) stay.
 */
export function answerInstead(raw: unknown, request: FastifyRequest, reply: FastifyReply): string {
  const error = loggedAnswer(raw instanceof Error ? raw : new Error(String(raw)), request);
  reply.removeHeader('content-length');
  reply.removeHeader('retry-after');
  errorHeaders(reply, error);
  reply.code(error.status).type('application/json; charset=utf-8');
  return JSON.stringify(envelope(request, error));
}

/** The catalogue's answer to `raw`, logged: an unexpected error's stack, or why a dependency is unavailable. */
function loggedAnswer(raw: FastifyError | ApiError | Error, request: FastifyRequest): ApiError {
  const error = toApiError(raw, request);
  if (error.code === 'INTERNAL_ERROR') {
    // Only name, message and stack: driver errors carry the query's parameters, which may hold secrets.
    const err = { type: raw.name, message: raw.message, stack: raw.stack, code: (raw as { code?: unknown }).code };
    request.log.error({ err, request_id: request.id }, 'unhandled error');
  } else if (error.code === 'UNAVAILABLE') {
    request.log.warn({ request_id: request.id, reason: raw.message.slice(0, 200) }, 'dependency unavailable');
  }
  return error;
}

function toApiError(raw: FastifyError | ApiError | Error, request: FastifyRequest): ApiError {
  if (raw instanceof ApiError) return raw;
  const fastifyError = raw as FastifyError;
  if (fastifyError.validation) {
    const found = toFieldProblems(fastifyError.validation, fastifyError.validationContext);
    const explained = request.routeOptions.config.explainValidation?.(found, request) ?? { problems: found };
    return validationError(explained.problems, undefined, explained.details);
  }
  if (isDatabaseUnavailable(raw)) {
    return new ApiError('UNAVAILABLE', 'The service is temporarily unavailable. Retry later.', {
      retryAfter: UNAVAILABLE_RETRY_AFTER_S,
    });
  }
  const problem = requestProblem(fastifyError);
  if (problem) return validationError([problem]);
  return new ApiError('INTERNAL_ERROR', 'An unexpected error occurred. It has been logged.');
}

/** Framework errors that mean the request itself is malformed. */
function requestProblem(error: FastifyError): FieldProblem | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { in: 'header', field: 'content-type', message: 'must be application/json' };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { in: 'header', field: 'content-length', message: 'does not match the body' };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { in: 'body', field: '', message: `is larger than the limit of ${BODY_LIMIT_BYTES} bytes` };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { in: 'body', field: '', message: 'is empty; send a JSON object or omit the content-type header' };
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { in: 'body', field: '', message: `is not valid JSON (${error.message})` };
    default:
      break;
  }
  if (error instanceof SyntaxError) return { in: 'body', field: '', message: `is not valid JSON (${error.message})` };
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    return { in: 'body', field: '', message: error.message };
  }
  return undefined;
}

/** Largest request body accepted by either API. */
export const BODY_LIMIT_BYTES = 64 * 1024;
