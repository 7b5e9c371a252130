import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import pino, { type LoggerOptions } from 'pino';
import { type AccessFields, accessLog } from './access-line.ts';

/** A pino logger whose lines are kept as written, with a fixed time so two lines can be compared byte for byte. */
function captured(options: LoggerOptions = {}) {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  const logger = pino({ level: 'info', timestamp: () => ',"time":1764000000000', ...options }, sink);
  return { logger, lines };
}

const FIELDS: AccessFields[] = [
  {
    api: 'partner-api',
    request_id: 'req_01jz0000000000000000000000',
    partner: 'acme',
    method: 'GET',
    route: '/api/public/v1/auth/whoami',
    status: 200,
    latency_ms: 0.37,
  },
  // No partner (a public route), no route (a 404), and texts JSON must escape.
  { api: 'operator-api', request_id: 'req_x', partner: undefined, method: 'M"\\X', route: null, status: 404, latency_ms: 12 },
  { api: 'partner-api', request_id: 'req_y', partner: 'é\u0001', method: 'GET', route: '/a/{b}', status: 500, latency_ms: Number.NaN },
];

test("the access line is byte for byte what pino writes for the same fields, with the logger's bindings", () => {
  for (const options of [{ base: { service: 'tenantry' } }, {}, { base: null }]) {
    const ours = captured(options);
    const theirs = captured(options);
    const write = accessLog(ours.logger);
    for (const fields of FIELDS) {
      write(fields);
      theirs.logger.info(fields, 'request');
    }
    assert.deepEqual(ours.lines, theirs.lines);
    assert.equal(JSON.parse(ours.lines[0] ?? '').msg, 'request');
  }
});

test('a child logger keeps its bindings in the access line', () => {
  const ours = captured({ base: { service: 'tenantry' } });
  const theirs = captured({ base: { service: 'tenantry' } });
  accessLog(ours.logger.child({ component: 'http' }))(FIELDS[0] as AccessFields);
  theirs.logger.child({ component: 'http' }).info(FIELDS[0], 'request');
  assert.deepEqual(ours.lines, theirs.lines);
  assert.equal(JSON.parse(ours.lines[0] ?? '').component, 'http');
});

test('no access line above the info level, and one again once the level comes back down', () => {
  const { logger, lines } = captured();
  const write = accessLog(logger);
  logger.level = 'warn';
  write(FIELDS[0] as AccessFields);
  assert.equal(lines.length, 0);
  logger.level = 'info';
  write(FIELDS[0] as AccessFields);
  assert.equal(lines.length, 1);
});

test("a logger configured in a way the line would not honour gets pino's own path", () => {
  const formatted = captured({ formatters: { log: (object) => ({ ...object, formatted: true }) } });
  accessLog(formatted.logger)(FIELDS[0] as AccessFields);
  assert.equal(JSON.parse(formatted.lines[0] ?? '').formatted, true);

  const mixed = captured({ mixin: () => ({ mixed: true }) });
  accessLog(mixed.logger)(FIELDS[0] as AccessFields);
  assert.equal(JSON.parse(mixed.lines[0] ?? '').mixed, true);

  const renamed = captured({ messageKey: 'message' });
  accessLog(renamed.logger)(FIELDS[0] as AccessFields);
  assert.equal(JSON.parse(renamed.lines[0] ?? '').message, 'request');

  const serialized = captured({ serializers: { partner: (id: string) => id.toUpperCase() } });
  accessLog(serialized.logger)(FIELDS[0] as AccessFields);
  assert.equal(JSON.parse(serialized.lines[0] ?? '').partner, 'ACME');
});
