import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import { createHttpApp } from './create-http-app.ts';
import { DeferredSchemas } from './deferred-schemas.ts';

describe('schemas compiled when first needed', () => {
  test('a deferred schema compiles at its first use, once; the warm-up compiles the rest, one a turn, and names any that fails', async () => {
    const schemas = new DeferredSchemas();
    const compiles: string[] = [];
    const getters = ['a', 'b', 'c'].map((name) =>
      schemas.defer(`GET /${name} body`, () => {
        compiles.push(name);
        if (name === 'c') throw new Error('strict mode: unknown keyword');
        return name.toUpperCase();
      }),
    );
    assert.deepEqual(compiles, [], 'nothing compiles when a schema is given');
    assert.equal(schemas.pending, 3);
    assert.equal(getters[1]?.(), 'B');
    assert.equal(getters[1]?.(), 'B');
    assert.deepEqual(compiles, ['b'], 'compiled at its first use, and kept');

    // Something queued for the next turn runs between the warm-up's compiles, not after them all.
    const order: string[] = [];
    setImmediate(() => order.push(`turn after ${compiles.length} compiles`));
    const warmed = await schemas.warm();
    assert.deepEqual(compiles, ['b', 'a', 'c']);
    assert.deepEqual(order, ['turn after 2 compiles']);
    assert.equal(warmed.compiled, 1, 'b was compiled by its use, c failed');
    assert.deepEqual(
      warmed.failed.map(({ what, error }) => [what, error.message]),
      [['GET /c body', 'strict mode: unknown keyword']],
    );
    assert.equal(schemas.pending, 1, 'the schema that fails stays pending: its requests fail as its compile does');
    assert.throws(() => getters[2]?.(), /unknown keyword/);
  });

  test('a warm-up stopped (the server closing) ends at its next turn', async () => {
    const schemas = new DeferredSchemas();
    for (let n = 0; n < 5; n++) schemas.defer(`GET /${n} body`, () => n);
    const warming = schemas.warm();
    schemas.stop();
    const warmed = await warming;
    assert.equal(warmed.compiled, 1);
    assert.equal(schemas.pending, 4);
  });

  test('an app compiles nothing while it starts; a request is validated and its answer serialised as before; HEAD routes compile only if used', async () => {
    const app = createHttpApp(pino({ level: 'silent' }), 'test');
    app.post(
      '/things',
      {
        schema: {
          body: {
            type: 'object',
            required: ['name'],
            additionalProperties: false,
            properties: { name: { type: 'string', maxLength: 5 } },
          },
          response: { 201: { type: 'object', properties: { name: { type: 'string' } } } },
        },
      },
      async (request, reply) =>
        reply.code(201).send({ ...(request.body as object), secret: 'not in the schema' } as unknown as { name: string }),
    );
    app.get('/things', { schema: { response: { 200: { type: 'array', items: { type: 'string' } } } } }, async () => ['one']);
    await app.ready();
    try {
      // POST: body, query string (every route has one), response; GET and its HEAD: query string, response each.
      assert.equal(app.schemas.pending, 7, 'every schema waits for its first use');

      const refused = await app.inject({ method: 'POST', url: '/things', payload: { name: 'too long', extra: 1 } });
      assert.equal(refused.statusCode, 400);
      const error = refused.json().error;
      assert.equal(error.code, 'VALIDATION_ERROR');
      assert.deepEqual(error.details.errors.map((e: { field: string }) => e.field).sort(), ['extra', 'name']);

      const created = await app.inject({ method: 'POST', url: '/things', payload: { name: 'box' } });
      assert.equal(created.statusCode, 201);
      assert.deepEqual(created.json(), { name: 'box' }, 'the response schema serialised the answer: no field outside it');
      assert.equal(app.schemas.pending, 4, "the POST route's three schemas compiled by its requests");

      const warmed = await app.schemas.warm();
      assert.deepEqual(warmed.failed, []);
      assert.equal(warmed.compiled, 4, 'the GET route and the HEAD route Fastify added to it');
      assert.equal(app.schemas.pending, 0);
      assert.deepEqual((await app.inject({ method: 'GET', url: '/things' })).json(), ['one']);
    } finally {
      await app.close();
    }
  });
});
