import { randomBytes } from 'node:crypto';

/**
 * Every id the server mints comes from here: a registered prefix, then 26
 * characters of Crockford base32 (48 bits of milliseconds, 80 random bits).
 * Ids sort by creation time; within one millisecond (or a clock that stands
 * still, as in tests) the random part counts up, so order is still creation order.
 */
const ID_PREFIXES = {
  request: 'req',
  audit: 'aud',
  operation: 'op',
  delivery: 'dlv',
  // Internal identities, never shown to partners.
  customer: 'cus',
  project: 'prj',
  user: 'usr',
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';
const RANDOM_CHARS = 16;

/** The characters of each digit value, as bytes. */
const CROCKFORD_BYTES = Buffer.from(CROCKFORD, 'latin1');
const TIME_CHARS = 10;

let lastMs = -1;
/** The random part of the last id, as base-32 digits, so it can count up. */
const lastRandom = new Uint8Array(RANDOM_CHARS);
/**
 * The last id's 26 characters after the prefix, kept as bytes: an id is one string made from them,
 * and only what changed is written again (the time once a millisecond, else the digits that counted
 * up). Building it a character at a time would make 26 intermediate strings per id.
 */
const lastChars = Buffer.alloc(TIME_CHARS + RANDOM_CHARS);
const PREFIXES = Object.fromEntries(Object.entries(ID_PREFIXES).map(([kind, prefix]) => [kind, `${prefix}_`])) as Record<IdKind, string>;

export function newId(kind: IdKind, nowMs: number = Date.now()): string {
  if (nowMs > lastMs) {
    lastMs = nowMs;
    writeTime(lastChars, nowMs);
    const bytes = randomPool(RANDOM_CHARS);
    for (let i = 0; i < RANDOM_CHARS; i++) {
      const digit = (bytes[i] ?? 0) & 31;
      lastRandom[i] = digit;
      lastChars[TIME_CHARS + i] = CROCKFORD_BYTES[digit] as number;
    }
  } else {
    // Same millisecond (or a clock that stood still or stepped back): count up.
    for (let i = RANDOM_CHARS - 1; i >= 0; i--) {
      const digit = ((lastRandom[i] ?? 0) + 1) & 31;
      lastRandom[i] = digit;
      lastChars[TIME_CHARS + i] = CROCKFORD_BYTES[digit] as number;
      if (digit !== 0) break;
    }
  }
  return PREFIXES[kind] + lastChars.toString('latin1', 0, TIME_CHARS + RANDOM_CHARS);
}

/** The creation time (ms) an id carries in its first 10 characters after the prefix. */
export function idTimeMs(id: string): number {
  const time = id.slice(id.indexOf('_') + 1, id.indexOf('_') + 11);
  let ms = 0;
  for (const char of time) ms = ms * 32 + CROCKFORD.indexOf(char);
  return ms;
}

/** The smallest id of `kind` minted at `ms`: every id minted at or after `ms` sorts above it. */
export function idFloor(kind: IdKind, ms: number): string {
  const time = Buffer.alloc(TIME_CHARS);
  writeTime(time, Math.max(0, Math.floor(ms)));
  return `${PREFIXES[kind]}${time.toString('latin1')}${'0'.repeat(RANDOM_CHARS)}`;
}

/** Writes `ms` as the 10 base-32 characters an id starts with, at the start of `into`. */
function writeTime(into: Buffer, ms: number): void {
  let rest = ms;
  for (let i = TIME_CHARS - 1; i >= 0; i--) {
    into[i] = CROCKFORD_BYTES[rest % 32] as number;
    rest = Math.floor(rest / 32);
  }
}

/** Random bytes from a pooled buffer: one system call per 256 ids on the request path. */
const POOL_SIZE = 4096;
let pool = randomBytes(POOL_SIZE);
let poolOffset = 0;

function randomPool(length: number): Uint8Array {
  if (poolOffset + length > POOL_SIZE) {
    pool = randomBytes(POOL_SIZE);
    poolOffset = 0;
  }
  const bytes = pool.subarray(poolOffset, poolOffset + length);
  poolOffset += length;
  return bytes;
}

/** Random characters from a 32-letter alphabet, each carrying 5 uniform bits. */
export function randomBase32(length: number, alphabet: string = CROCKFORD): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const byte of bytes) out += alphabet.charAt(byte & 31);
  return out;
}
