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
} as const;

export type IdKind = keyof typeof ID_PREFIXES;

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';
const RANDOM_CHARS = 16;
const RANDOM_MAX = 32n ** BigInt(RANDOM_CHARS);

let lastMs = -1;
let lastRandom = 0n;

export function newId(kind: IdKind, nowMs: number = Date.now()): string {
  let ms = nowMs;
  if (ms <= lastMs) {
    ms = lastMs;
    lastRandom = (lastRandom + 1n) % RANDOM_MAX;
  } else {
    lastMs = ms;
    lastRandom = BigInt(`0x${randomBytes(10).toString('hex')}`);
  }
  return `${ID_PREFIXES[kind]}_${encode(BigInt(ms), 10)}${encode(lastRandom, RANDOM_CHARS)}`;
}

function encode(value: bigint, length: number): string {
  let out = '';
  let rest = value;
  for (let i = 0; i < length; i++) {
    out = CROCKFORD.charAt(Number(rest % 32n)) + out;
    rest /= 32n;
  }
  return out;
}

/** Random characters from a 32-letter alphabet, each carrying 5 uniform bits. */
export function randomBase32(length: number, alphabet: string = CROCKFORD): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const byte of bytes) out += alphabet.charAt(byte & 31);
  return out;
}
