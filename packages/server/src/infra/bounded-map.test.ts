import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rememberBounded } from './bounded-map.ts';

describe('rememberBounded', () => {
  it('keeps the newest entries up to the bound, an entry written again counting as new', () => {
    const entries = new Map<string, number>();
    rememberBounded(entries, 'a', 1, 3);
    rememberBounded(entries, 'b', 2, 3);
    rememberBounded(entries, 'c', 3, 3);
    rememberBounded(entries, 'a', 4, 3);
    rememberBounded(entries, 'd', 5, 3);
    assert.deepEqual(
      [...entries],
      [
        ['c', 3],
        ['a', 4],
        ['d', 5],
      ],
    );
  });

  it('never grows past the bound however many keys it sees', () => {
    const entries = new Map<number, number>();
    for (let i = 0; i < 1_000; i++) rememberBounded(entries, i, i, 100);
    assert.equal(entries.size, 100);
    assert.equal(entries.get(899), undefined);
    assert.equal(entries.get(900), 900);
  });
});
