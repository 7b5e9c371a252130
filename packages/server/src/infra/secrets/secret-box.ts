import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Encryption of secrets at rest (signing keys, webhook signing secrets). The
 * key is kept outside the database (a file in the data directory, or
 * TENANTRY_SECRET_KEY), so a copy of the database alone gives no usable secret.
 *
 * A sealed value is `tsb1.<key id>.<base64url(nonce ‖ ciphertext ‖ tag)>`,
 * AES-256-GCM with a random 96-bit nonce. The additional data is the value's
 * context (for example `webhook:acme:live`), so a sealed value copied into
 * another row or column does not open there.
 */
const VERSION = 'tsb1';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
export const SECRET_KEY_BYTES = 32;

export class SecretKeyError extends Error {
  override name = 'SecretKeyError';
}

/** The key's public fingerprint: safe to log and to print, and stored with every sealed value. */
export function secretKeyId(key: Buffer): string {
  return createHash('sha256').update('tenantry secret key id\n').update(key).digest('base64url').slice(0, 10);
}

export function isSealed(value: string): boolean {
  return value.startsWith(`${VERSION}.`);
}

/** The id of the key a sealed value was sealed with. */
export function sealedKeyId(value: string): string | undefined {
  const [version, keyId] = value.split('.');
  return version === VERSION ? keyId : undefined;
}

export class SecretBox {
  readonly #keys: Map<string, Buffer>;
  /** The key that seals; the others (older keys during a rotation) only open. */
  readonly activeKeyId: string;

  /** `keys`: the active key first, then the keys it replaces. */
  constructor(keys: readonly Buffer[]) {
    const first = keys[0];
    if (!first) throw new SecretKeyError('no secret key');
    for (const key of keys) if (key.length !== SECRET_KEY_BYTES) throw new SecretKeyError(`a secret key must be ${SECRET_KEY_BYTES} bytes`);
    this.#keys = new Map(keys.map((key) => [secretKeyId(key), key]));
    this.activeKeyId = secretKeyId(first);
  }

  get keyIds(): string[] {
    return [...this.#keys.keys()];
  }

  seal(plaintext: string | Buffer, context: string): string {
    const key = this.#keys.get(this.activeKeyId) as Buffer;
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, nonce);
    cipher.setAAD(Buffer.from(context));
    const body = Buffer.concat([nonce, cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
    return `${VERSION}.${this.activeKeyId}.${body.toString('base64url')}`;
  }

  /** The plaintext, or a SecretKeyError naming why it cannot be opened (unknown key, tampered, wrong context). */
  open(sealed: string, context: string): Buffer {
    const [version, keyId, data, extra] = sealed.split('.');
    if (version !== VERSION || !keyId || !data || extra !== undefined) throw new SecretKeyError('not a sealed value');
    const key = this.#keys.get(keyId);
    if (!key) {
      throw new SecretKeyError(`sealed with secret key ${keyId}, which this process does not have (it has ${this.keyIds.join(', ')})`);
    }
    const body = Buffer.from(data, 'base64url');
    if (body.length < NONCE_BYTES + TAG_BYTES) throw new SecretKeyError('sealed value is truncated');
    const decipher = createDecipheriv('aes-256-gcm', key, body.subarray(0, NONCE_BYTES));
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(body.subarray(NONCE_BYTES, body.length - TAG_BYTES)), decipher.final()]);
    } catch {
      throw new SecretKeyError(`sealed value does not open with secret key ${keyId} in context ${context}`);
    }
  }

  openText(sealed: string, context: string): string {
    return this.open(sealed, context).toString('utf8');
  }

  /** True when the value was sealed with an older key and should be sealed again with the active one. */
  isStale(sealed: string): boolean {
    return sealedKeyId(sealed) !== this.activeKeyId;
  }
}

/** Where keys came from, as a refusal names it: the setting to change, and the variable or file that held them. */
export interface SecretKeyOrigin {
  variable: 'TENANTRY_SECRET_KEY' | 'TENANTRY_SECRET_KEY_FILE' | 'TENANTRY_DATA_DIR';
  from: string;
}
