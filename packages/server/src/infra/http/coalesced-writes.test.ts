import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { test } from 'node:test';
import type { FastifyReply } from 'fastify';
import pino from 'pino';
import { rawAnswer, rawHttp } from '../../../test/client.ts';
import { createHttpApp } from './create-http-app.ts';

async function listening(app: ReturnType<typeof createHttpApp>): Promise<number> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return (app.server.address() as AddressInfo).port;
}

test('the responses to requests handled in one turn of the event loop are written together at its end', async () => {
  const app = createHttpApp(pino({ level: 'silent' }), 'test');
  const replies: FastifyReply[] = [];
  // For each request as it is handled: whether the responses of those handled before it were written.
  const writtenBefore: boolean[][] = [];
  app.get<{ Params: { n: string } }>('/slot/:n', (request, reply) => {
    writtenBefore.push(replies.map((earlier) => earlier.raw.writableEnded));
    replies.push(reply);
    return { n: request.params.n };
  });
  const port = await listening(app);
  try {
    // Both connections accepted by the server before either request is sent.
    let accepted = 0;
    const bothAccepted = new Promise<void>((resolve) => {
      app.server.on('connection', () => {
        if (++accepted === 2) resolve();
      });
    });
    const sockets = [0, 1].map(() => connect(port, '127.0.0.1'));
    // Connected on the client's side too, so each write below goes out at once, not on 'connect'.
    await Promise.all([bothAccepted, ...sockets.map((socket) => once(socket, 'connect'))]);
    const answers = sockets.map(rawAnswer);
    for (const [n, socket] of sockets.entries()) socket.write(`GET /slot/${n} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n`);
    // This thread holds still until both requests wait in the server's sockets: its next poll finds both.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
    const texts = await Promise.all(answers);
    assert.deepEqual(writtenBefore, [[], [false]], "the first response waited for the second request's handler");
    for (const text of texts) assert.match(text, /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n\{"n":"[01]"\}$/);
    assert.notEqual(texts[0], texts[1]);
  } finally {
    await app.close();
  }
});

test('a response Node refuses to write (a control character in a header) answers 500 INTERNAL_ERROR in the envelope, and the server goes on', async () => {
  const app = createHttpApp(pino({ level: 'silent' }), 'test');
  app.get('/bad-header', (_request, reply) => reply.header('x-broken', 'a\u0007b').send({ ok: true }));
  app.get('/fine', () => ({ ok: true }));
  const port = await listening(app);
  try {
    const ask = (path: string) => rawHttp(port, `GET ${path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n`, false);
    const refused = await ask('/bad-header');
    assert.match(refused, /^HTTP\/1\.1 500 Internal Server Error\r\n/);
    assert.match(refused, /\r\nx-request-id: req_\w+\r\n/);
    assert.doesNotMatch(refused, /x-broken/);
    assert.equal(JSON.parse(refused.slice(refused.indexOf('\r\n\r\n') + 4)).error.code, 'INTERNAL_ERROR');
    assert.match(await ask('/fine'), /^HTTP\/1\.1 200 OK/);
  } finally {
    await app.close();
  }
});
