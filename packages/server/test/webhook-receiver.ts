import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { Resolver } from '../src/webhooks/destination.ts';
import { checkWebhookBody } from './contract.ts';

const TLS_DIR = fileURLToPath(new URL('./fixtures/webhook-tls/', import.meta.url));
/** The test CA that signed the receiver's certificate (for receiver.test, localhost, 127.0.0.1 and ::1). */
export const TEST_CA_FILE = `${TLS_DIR}ca.pem`;

export interface ReceivedDelivery {
  headers: Record<string, string | string[] | undefined>;
  /** The raw body bytes, as a receiver must verify them. */
  raw: Buffer;
  body: { id: string; event: string; created_at: string; partner_id: string; data: Record<string, unknown> };
  path: string;
  receivedAtMs: number;
}

/**
 * What the receiver answers: a status, `hang` (never answer), `reset` (drop the connection), or a status
 * after a delay (a receiver that crawls).
 */
export type Answer = number | 'hang' | 'reset' | { status: number; afterMs: number };

/**
 * A real HTTPS webhook receiver on loopback, with a certificate from the test CA (trusted by the
 * server through TENANTRY_WEBHOOK_CA_FILE). It keeps every delivery and answers as told.
 */
export class WebhookReceiver {
  readonly deliveries: ReceivedDelivery[] = [];
  /** Deliveries whose body the OpenAPI document's `webhooks` section does not describe; `close()` fails on any. */
  readonly contractViolations: string[] = [];
  answer: (delivery: ReceivedDelivery) => Answer = () => 200;
  /** The most requests open at once, by path: from arrival until answered or dropped by either side. */
  readonly mostOpen = new Map<string, number>();
  readonly #open = new Map<string, number>();
  readonly #server: Server;
  readonly #hanging = new Set<() => void>();

  constructor() {
    this.#server = createServer(
      { key: readFileSync(`${TLS_DIR}receiver.key`), cert: readFileSync(`${TLS_DIR}receiver.pem`) },
      (request, response) => {
        const path = request.url ?? '';
        const open = (this.#open.get(path) ?? 0) + 1;
        this.#open.set(path, open);
        this.mostOpen.set(path, Math.max(open, this.mostOpen.get(path) ?? 0));
        response.once('close', () => this.#open.set(path, (this.#open.get(path) ?? 1) - 1));
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          const raw = Buffer.concat(chunks);
          const delivery: ReceivedDelivery = {
            headers: request.headers,
            raw,
            body: JSON.parse(raw.toString('utf8')) as ReceivedDelivery['body'],
            path: request.url ?? '',
            receivedAtMs: Date.now(),
          };
          this.deliveries.push(delivery);
          try {
            checkWebhookBody(delivery.body);
          } catch (error) {
            this.contractViolations.push((error as Error).message);
          }
          const answer = this.answer(delivery);
          if (answer === 'hang') {
            this.#hanging.add(() => response.destroy());
            return;
          }
          if (answer === 'reset') {
            request.socket.destroy();
            return;
          }
          if (typeof answer === 'object') {
            const timer = setTimeout(() => response.writeHead(answer.status).end('ok'), answer.afterMs);
            this.#hanging.add(() => {
              clearTimeout(timer);
              response.destroy();
            });
            return;
          }
          response.writeHead(answer, answer >= 300 && answer < 400 ? { location: '/redirected' } : {}).end('ok');
        });
      },
    );
  }

  async listen(host = '127.0.0.1'): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, host, resolve));
    return this;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  /** The receiver's URL under a host name (which the test resolver points at loopback) or at 127.0.0.1. */
  url(path = '/hooks', host = '127.0.0.1'): string {
    return `https://${host}:${this.port}${path}`;
  }

  ids(): string[] {
    return this.deliveries.map((d) => d.body.id);
  }

  of(event: string): ReceivedDelivery[] {
    return this.deliveries.filter((d) => d.body.event === event);
  }

  async close(): Promise<void> {
    for (const release of this.#hanging) release();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    if (this.contractViolations.length > 0) throw new Error(this.contractViolations.join('\n'));
  }
}

/**
 * HMAC-SHA256 written out from its definition (RFC 2104) over SHA-256, so the test checks the
 * server's signatures with an implementation that shares nothing with the server's.
 */
export function referenceHmacSha256(key: Buffer, message: Buffer): string {
  const block = 64;
  let k = key.length > block ? createHash('sha256').update(key).digest() : key;
  k = Buffer.concat([k, Buffer.alloc(block - k.length)]);
  const ipad = Buffer.from(k.map((byte) => byte ^ 0x36));
  const opad = Buffer.from(k.map((byte) => byte ^ 0x5c));
  const inner = createHash('sha256').update(ipad).update(message).digest();
  return createHash('sha256').update(opad).update(inner).digest('hex');
}

/**
 * The receiver's side of partner-api.md, Verification rules: the raw bytes, HMAC of
 * `<timestamp>.<raw body>` keyed with the secret's ASCII, constant-time comparison, and a 5-minute
 * tolerance. Which of the secrets verified it, or undefined.
 */
export function verifyDelivery(delivery: ReceivedDelivery, secrets: string[], nowMs: number): string | undefined {
  const timestamp = String(delivery.headers['x-service-timestamp'] ?? '');
  const signature = String(delivery.headers['x-service-signature'] ?? '');
  if (!/^\d+$/.test(timestamp) || Math.abs(nowMs / 1000 - Number(timestamp)) > 300) return undefined;
  if (!signature.startsWith('sha256=')) return undefined;
  const given = Buffer.from(signature.slice(7), 'utf8');
  const message = Buffer.concat([Buffer.from(`${timestamp}.`, 'utf8'), delivery.raw]);
  return secrets.find((secret) => {
    const expected = Buffer.from(referenceHmacSha256(Buffer.from(secret, 'ascii'), message), 'utf8');
    return expected.length === given.length && timingSafeEqual(expected, given);
  });
}

/** A resolver that answers the host names set in `dns` and nothing else, as `getaddrinfo` fails. */
export function tableResolver(): { dns: Map<string, string[]>; resolver: Resolver } {
  const dns = new Map<string, string[]>();
  const resolver: Resolver = {
    async resolve(host) {
      const addresses = dns.get(host);
      if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      return addresses;
    },
  };
  return { dns, resolver };
}
