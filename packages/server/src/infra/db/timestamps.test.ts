import assert from 'node:assert/strict';
import test from 'node:test';
import pg from 'pg';
import { parseTimestamptz, parseUtcTimestamp, TYPE_PARSERS } from './timestamps.ts';

const pgParse = pg.types.getTypeParser(1184, 'text') as (text: string) => Date | number | null;

/** How PostgreSQL writes `at` in a UTC session, with `digits` of the fraction (trailing zeros dropped, as it does). */
function postgresText(at: Date, micros: number, digits: number): string {
  const iso = at.toISOString();
  const fraction = String(at.getUTCMilliseconds() * 1000 + micros)
    .padStart(6, '0')
    .slice(0, digits)
    .replace(/0+$/, '');
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)}${fraction ? `.${fraction}` : ''}+00`;
}

test("the same Date as pg's own parser, for timestamps across four centuries and every length of fraction", () => {
  let seed = 7;
  const random = () => {
    seed = (seed * 48271) % 2147483647;
    return seed / 2147483647;
  };
  let fast = 0;
  for (let i = 0; i < 20_000; i++) {
    const at = new Date(Date.UTC(1900, 0, 1) + Math.floor(random() * 400 * 365.25 * 86_400_000));
    const text = postgresText(at, Math.floor(random() * 1000), Math.floor(random() * 7));
    const ours = parseTimestamptz(text) as Date;
    assert.equal(ours.getTime(), (pgParse(text) as Date).getTime(), text);
    if (parseUtcTimestamp(text)) fast++;
  }
  assert.equal(fast, 20_000, 'every timestamp of a UTC session takes the fast path');
});

test("every millisecond's fraction, and the edges of the day, year and leap day", () => {
  for (let ms = 0; ms < 1000; ms++) {
    for (const micros of ['', '0', '000', '999']) {
      const text = `2026-11-29 10:00:00.${String(ms).padStart(3, '0')}${micros}+00`;
      assert.equal((parseUtcTimestamp(text) as Date).getTime(), (pgParse(text) as Date).getTime(), text);
    }
  }
  for (const text of ['2026-12-31 23:59:59.999999+00', '2024-02-29 00:00:00+00', '1000-01-01 00:00:00+00', '9999-12-31 23:59:59.5+00']) {
    assert.equal((parseUtcTimestamp(text) as Date).getTime(), (pgParse(text) as Date).getTime(), text);
  }
});

test("any other form goes to pg's parser and gives what it gives", () => {
  for (const text of [
    '2026-11-29 10:00:00.123+05:30',
    '2026-11-29 10:00:00-08',
    '0099-01-01 00:00:00+00',
    '0500-06-01 12:00:00+00',
    '2026-11-29 10:00:00+00 BC',
    '12026-11-29 10:00:00+00',
    '2026-11-29 10:00:00.+00',
    'infinity',
    '-infinity',
  ]) {
    assert.equal(parseUtcTimestamp(text), undefined, text);
    const ours = parseTimestamptz(text);
    const theirs = pgParse(text);
    assert.equal(ours instanceof Date ? ours.getTime() : ours, theirs instanceof Date ? theirs.getTime() : theirs, text);
  }
});

test('the pool is given our parser for timestamptz and pg’s own for every other type', () => {
  const getTypeParser = TYPE_PARSERS.getTypeParser as (oid: number, format?: string) => unknown;
  assert.equal(getTypeParser(1184, 'text'), parseTimestamptz);
  assert.equal(getTypeParser(1184), parseTimestamptz);
  assert.equal(getTypeParser(1114, 'text'), pg.types.getTypeParser(1114, 'text'));
  assert.equal(getTypeParser(3802, 'text'), pg.types.getTypeParser(3802, 'text'));
  assert.equal(getTypeParser(1184, 'binary'), pg.types.getTypeParser(1184, 'binary'));
});
