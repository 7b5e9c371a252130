import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import pino from 'pino';
import { ApiError } from '../errors/catalogue.ts';
import { createHttpApp } from './create-http-app.ts';
import { appendRouteHook } from './route-hooks.ts';

/** What `pg` throws when `pg_terminate_backend` ends the session a query ran on. */
function terminated(): Error {
  return Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01', severity: 'FATAL' });
}

/**
 * An app whose routes each get an `onSend` hook (as the idempotency plugin appends one) that fails with
 * `failure`: `/ok` answers 200, `/refused` 409 CONFLICT, `/lost` loses the database itself (503).
 */
function appWithFailingOnSend(failure: () => Error) {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  const app = createHttpApp(pino({ level: 'info' }, sink), 'test');
  app.addHook('onRoute', (route) =>
    appendRouteHook(route, 'onSend', async () => {
      throw failure();
    }),
  );
  app.get('/ok', async () => ({ ok: true }));
  app.get('/refused', async () => {
    throw new ApiError('CONFLICT', 'The customer is being deleted.');
  });
  app.get('/lost', async () => {
    throw terminated();
  });
  return { app, log: () => lines.join('') };
}

test("a route's onSend hook losing the database after any answer (success, refusal, or the error handler's 503) answers 503 UNAVAILABLE in the envelope", async () => {
  const { app, log } = appWithFailingOnSend(terminated);
  try {
    for (const path of ['/ok', '/refused', '/lost']) {
      const response = await app.inject({ method: 'GET', url: path });
      assert.equal(response.statusCode, 503, `${path}: ${response.body}`);
      assert.equal(response.headers['retry-after'], '5', path);
      assert.match(String(response.headers['content-type']), /^application\/json/);
      const body = response.json() as { status: string; error: { code: string; message: string; request_id: string } };
      assert.equal(body.status, 'error', `${path}: ${response.body}`);
      assert.equal(body.error.code, 'UNAVAILABLE', path);
      assert.equal(body.error.request_id, response.headers['x-request-id'], path);
      assert.doesNotMatch(response.body, /administrator command|57P01|statusCode/, `${path}: the database's words stay in the log`);
    }
    assert.match(log(), /terminating connection due to administrator command/, 'the reason is logged');
  } finally {
    await app.close();
  }
});

test("a route's onSend hook failing for another reason after the error handler answered: 500 INTERNAL_ERROR in the envelope, its message only in the log", async () => {
  const { app, log } = appWithFailingOnSend(() => new TypeError('secret internals went wrong'));
  try {
    for (const path of ['/ok', '/refused', '/lost']) {
      const response = await app.inject({ method: 'GET', url: path });
      assert.equal(response.statusCode, 500, `${path}: ${response.body}`);
      const body = response.json() as { status: string; error: { code: string; request_id: string } };
      assert.equal(body.status, 'error', `${path}: ${response.body}`);
      assert.equal(body.error.code, 'INTERNAL_ERROR', path);
      assert.equal(body.error.request_id, response.headers['x-request-id'], path);
      assert.doesNotMatch(response.body, /secret internals|statusCode/, path);
    }
    assert.match(log(), /secret internals went wrong/);
  } finally {
    await app.close();
  }
});
