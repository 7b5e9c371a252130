import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { atEndOfTurn } from '../end-of-turn.ts';

type Done = (error: Error | null, payload?: unknown) => void;

/**
 * Responses finished during one turn of the event loop are written together at its end.
 *
 * Each response's write wakes its client. Written as each handler finishes, between the requests still
 * to handle, every write finds a client that has read the previous answer and gone back to sleep, and
 * pays for waking it: on this project's 2-core virtual machine the kernel's wake-up of an idle peer is
 * the largest part of a short request's CPU (`GET /auth/whoami` 58 → 47 µs a request when written
 * together, in a slow hour). Written back to back, the first write wakes the client and the others
 * find it awake. A response waits at most for the rest of its turn: the requests and database results
 * that arrived with it, each handled as far as it goes without waiting.
 *
 * The hook is the root's first `onSend` hook: the ones after it run when the batch is written. Until
 * then the reply is not `sent`; Fastify's `reply.then` (an async handler that returns `reply`) waits
 * for the response's end, so nothing sends twice.
 */
export function coalesceResponseWrites(app: FastifyInstance): void {
  app.addHook('onSend', (_request: FastifyRequest, reply: FastifyReply, payload: unknown, done: Done) => {
    atEndOfTurn(write, { reply, payload, done });
  });
}

/** Replies whose first writing failed: the second is the error envelope, and if that fails too the connection is closed. */
const failedOnce = new WeakSet<FastifyReply>();

function write({ reply, payload, done }: { reply: FastifyReply; payload: unknown; done: Done }): void {
  try {
    done(null, payload);
  } catch (error) {
    // Called in the handler's turn, this would have reached Fastify's catch, which answers with the error
    // (its wrap-thenable.js). What throws here is a response Node refuses to write, a header value
    // with a control character: answered with the error envelope and only the request id header.
    if (failedOnce.has(reply) || reply.raw.headersSent) {
      reply.log.error({ err: error, request_id: reply.request.id }, 'a response could not be written');
      reply.raw.destroy();
      return;
    }
    failedOnce.add(reply);
    for (const name of Object.keys(reply.getHeaders())) if (name !== 'x-request-id') reply.removeHeader(name);
    // Node kept the refused status's reason phrase; the error's status gets its own.
    reply.raw.statusMessage = '';
    reply.send(error instanceof Error ? error : new Error(String(error)));
  }
}
