import { createHash } from 'node:crypto';
import type { Db } from '../infra/db/handle.ts';
import type { KeyMode } from '../infra/mode.ts';
import { isSealed, type SecretBox } from '../infra/secrets/secret-box.ts';
import type { WebhookTables } from './tables.ts';

/**
 * Webhook signing secrets at rest. The current secret must stay recoverable
 * (every delivery is signed with it), so it is sealed with the deployment's
 * secret key, bound to its partner and mode. Nothing else of it is kept: retries
 * reuse the signature stored with the delivery, and an idempotent replay of the
 * creating PUT keeps only the secret's hash (to tell whether it is still current).
 */
export class WebhookSecrets {
  readonly #box: SecretBox;
  /** Opened secrets by sealed value: the dispatcher signs many deliveries with one secret. */
  readonly #opened = new Map<string, string>();

  constructor(box: SecretBox) {
    this.#box = box;
  }

  seal(partnerId: string, mode: KeyMode, secret: string): string {
    return this.#box.seal(secret, context(partnerId, mode));
  }

  open(row: { partner_id: string; mode: KeyMode; secret: string }): string {
    const cached = this.#opened.get(row.secret);
    if (cached !== undefined) return cached;
    const secret = this.#box.openText(row.secret, context(row.partner_id, row.mode));
    if (this.#opened.size >= 10_000) this.#opened.clear();
    this.#opened.set(row.secret, secret);
    return secret;
  }
}

/** The hash an idempotent replay keeps instead of the secret. */
export function secretFingerprint(secret: string): string {
  return createHash('sha256').update(`tenantry webhook secret\n${secret}`).digest('hex');
}

const context = (partnerId: string, mode: KeyMode) => `webhook:${partnerId}:${mode}`;

/**
 * At start: seals secrets an earlier version stored in plain text, and seals again those sealed
 * with an older key (a key rotation). Returns how many rows changed.
 */
export async function resealWebhookSecrets(db: Db<WebhookTables>, box: SecretBox): Promise<number> {
  const rows = await db.selectFrom('webhooks').select(['partner_id', 'mode', 'secret']).execute();
  let changed = 0;
  for (const row of rows) {
    const legacy = !isSealed(row.secret);
    if (!legacy && !box.isStale(row.secret)) continue;
    const plain = legacy ? row.secret : box.openText(row.secret, context(row.partner_id, row.mode));
    const result = await db
      .updateTable('webhooks')
      .set({ secret: box.seal(plain, context(row.partner_id, row.mode)) })
      .where('partner_id', '=', row.partner_id)
      .where('mode', '=', row.mode)
      .where('secret', '=', row.secret)
      .executeTakeFirst();
    changed += Number(result.numUpdatedRows);
  }
  return changed;
}
