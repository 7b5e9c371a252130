import { hash, timingSafeEqual } from 'node:crypto';
import { randomBase32 } from '../infra/ids.ts';
import type { KeyMode } from '../infra/mode.ts';

/**
 * API keys: `tnt_<mode>_<partner>_<kid>_<secret>` (CONTRACT §1). The kid is 12
 * characters of [a-z2-7]; the secret is 52 characters of the same alphabet
 * (260 random bits). Only SHA-256 of the secret is stored: with 256 bits of
 * entropy a fast hash is as strong as a slow one, and it keeps exchange cheap.
 */
const KEY_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const KID_LENGTH = 12;
const SECRET_LENGTH = 52;
const KEY_PATTERN = /^tnt_(live|test)_([a-z][a-z0-9-]{1,30}[a-z0-9])_([a-z2-7]{12})_([a-z2-7]{52})$/;

export interface ParsedKey {
  mode: KeyMode;
  partnerId: string;
  kid: string;
  secret: string;
}

export interface NewKey extends ParsedKey {
  key: string;
  secretHash: string;
}

export function generateKey(partnerId: string, mode: KeyMode): NewKey {
  const kid = randomBase32(KID_LENGTH, KEY_ALPHABET);
  const secret = randomBase32(SECRET_LENGTH, KEY_ALPHABET);
  return { key: `tnt_${mode}_${partnerId}_${kid}_${secret}`, mode, partnerId, kid, secret, secretHash: hashSecret(secret) };
}

export function parseKey(key: string): ParsedKey | undefined {
  const match = KEY_PATTERN.exec(key);
  if (!match) return undefined;
  const [, mode, partnerId, kid, secret] = match;
  if (!mode || !partnerId || !kid || !secret) return undefined;
  return { mode: mode as KeyMode, partnerId, kid, secret };
}

export function hashSecret(secret: string): string {
  return hash('sha256', secret, 'hex');
}

/** Constant-time comparison of a presented secret's hash (hashSecret) with a stored one. */
export function hashesMatch(presentedHash: string, storedHash: string): boolean {
  const presented = Buffer.from(presentedHash, 'hex');
  const stored = Buffer.from(storedHash, 'hex');
  return presented.length === stored.length && timingSafeEqual(presented, stored);
}

/** A stand-in hash compared against when no key exists, so every failure costs the same. */
export const DECOY_HASH = hashSecret('tenantry-decoy-secret');
export const DECOY_KID = 'aaaaaaaaaaaa';
