import assert from 'node:assert/strict';
import test from 'node:test';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { Type } from 'typebox';
import { serializationSchema } from './serialization-schema.ts';

const Timestamp = Type.String({ format: 'date-time' });
/** A list item shaped like the API's: nullable strings and timestamps, a status union, a nested object. */
const Item = Type.Object({
  id: Type.String(),
  note: Type.Union([Type.String(), Type.Null()]),
  status: Type.Union([Type.Literal('active'), Type.Literal('suspended')]),
  count: Type.Union([Type.Integer(), Type.Null()]),
  owner: Type.Object({ email: Type.Union([Type.String({ maxLength: 254 }), Type.Null()]) }),
  created_at: Timestamp,
  suspended_at: Type.Union([Timestamp, Type.Null()]),
  target: Type.Union([Type.Object({ kind: Type.Literal('a') }), Type.Object({ kind: Type.Literal('b'), n: Type.Integer() })]),
});
const Page = Type.Object({ data: Type.Array(Item), pagination: Type.Object({ next_cursor: Type.Union([Type.String(), Type.Null()]) }) });

function serializer(schema: unknown): (data: unknown) => string {
  return SerializerSelector()()({ schema, method: 'GET', url: '/items', httpStatus: '200' } as never) as (data: unknown) => string;
}

test('unions of scalars become lists of types; unions of objects stay unions; the input is left as it was', () => {
  const before = JSON.stringify(Page);
  type Node = { properties: Record<string, Node>; items: Node } & Record<string, unknown>;
  const rewritten = serializationSchema(Page) as unknown as Node;
  assert.equal(JSON.stringify(Page), before, 'the route keeps its own schema (the API reference is built from it)');
  const item = (rewritten.properties.data as Node).items.properties;
  assert.deepEqual(item.note, { type: ['string', 'null'] });
  assert.deepEqual(item.status, { type: 'string' });
  assert.deepEqual(item.count, { type: ['integer', 'null'] });
  assert.deepEqual((item.owner as Node).properties.email, { type: ['string', 'null'] });
  assert.deepEqual(item.suspended_at, { type: ['string', 'null'], format: 'date-time' });
  assert.deepEqual(item.created_at, Timestamp, 'a schema with no union is the same object');
  assert.ok('anyOf' in (item.target as Node), 'a union of objects needs its branches to be written');
  assert.deepEqual((rewritten.properties.pagination as Node).properties.next_cursor, { type: ['string', 'null'] });
});

test('a union whose string branches differ in format is kept', () => {
  const mixed = Type.Union([Type.String({ format: 'date-time' }), Type.String()]);
  assert.equal(serializationSchema(mixed), mixed);
});

test('both serialisers write the same text, nulls, escapes, timestamps and objects included', () => {
  const original = serializer(Page);
  const simpler = serializer(serializationSchema(Page));
  const values = [
    {
      data: [
        {
          id: 'acme',
          note: null,
          status: 'active',
          count: null,
          owner: { email: null },
          created_at: '2026-11-29T10:00:00.570Z',
          suspended_at: null,
          target: { kind: 'a' },
        },
        {
          id: 'quote"back\\slash\nline\u2028',
          note: 'ünïcödé 🚀 "quoted"',
          status: 'suspended',
          count: 42,
          owner: { email: 'owner@acme.example' },
          created_at: new Date('2026-01-02T03:04:05.006Z'),
          suspended_at: new Date('2026-11-29T10:00:00.570Z'),
          target: { kind: 'b', n: 3 },
        },
      ],
      pagination: { next_cursor: 'Y3Vyc29y' },
    },
    { data: [], pagination: { next_cursor: null } },
  ];
  for (const value of values) {
    const text = simpler(value);
    assert.equal(text, original(value));
    assert.doesNotThrow(() => JSON.parse(text));
  }
  assert.match(simpler(values[0]), /"suspended_at":"2026-11-29T10:00:00\.570Z"/, 'a Date is written as a timestamp, as before');
});
