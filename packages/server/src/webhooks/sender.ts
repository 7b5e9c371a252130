import https from 'node:https';
import { isIP } from 'node:net';
import { createSecureContext, rootCertificates } from 'node:tls';
import type { Logger } from 'pino';
import { refuseInTransaction } from '../infra/db/transactions.ts';
import type { DestinationGuard } from './destination.ts';

/** partner-api.md, Limits: a delivery times out after 5 seconds (resolving the host included). */
export const DELIVERY_TIMEOUT_MS = 5_000;

export interface Delivery {
  url: string;
  /** The operator allowed this partner private destinations. */
  allowPrivate: boolean;
  body: string;
  headers: Record<string, string>;
}

export interface AttemptResult {
  delivered: boolean;
  /** The receiver's HTTP status; null when no answer came. */
  status: number | null;
  error: string | null;
  /** Whether a later attempt may succeed (429, 5xx, 3xx, timeouts, network errors). */
  retry: boolean;
}

/**
 * One HTTP POST to a receiver. The host is resolved and checked on every attempt, and the connection
 * goes to the checked address (the agent's DNS lookup is replaced by it), with TLS still verifying
 * the certificate against the host name. Redirects are never followed.
 */
export class WebhookSender {
  readonly #guard: DestinationGuard;
  readonly #logger: Logger | undefined;
  readonly #agent: https.Agent;
  readonly #timeoutMs: number;

  constructor(options: {
    guard: DestinationGuard;
    extraCa?: string | undefined;
    timeoutMs?: number;
    logger?: Logger;
    /** Idle connections kept per receiver: as many as may be in flight to it, so a busy one reconnects never. */
    idleSocketsPerReceiver?: number;
  }) {
    this.#guard = options.guard;
    this.#logger = options.logger;
    this.#timeoutMs = options.timeoutMs ?? DELIVERY_TIMEOUT_MS;
    // No per-origin socket limit: partners may share a receiver host (a webhook relay service), and
    // one partner's slow deliveries must not queue another's. The dispatcher bounds concurrency per
    // receiver instead.
    // An extra CA goes in as one secure context built here, never as the `ca` option: Node's agent
    // puts `ca` into the key of its socket pool, so every request would join and hash ~140 public CA
    // certificates (180 KB), and every new connection would parse them again.
    this.#agent = new https.Agent({
      keepAlive: true,
      maxFreeSockets: options.idleSocketsPerReceiver ?? 16,
      ...(options.extraCa ? { secureContext: createSecureContext({ ca: [...rootCertificates, options.extraCa] }) } : {}),
    });
  }

  async send(delivery: Delivery): Promise<AttemptResult> {
    refuseInTransaction('WebhookSender.send');
    const started = performance.now();
    const url = new URL(delivery.url);
    const destination = await this.#guard.check(url, delivery.allowPrivate, this.#timeoutMs);
    if (!destination.ok) {
      this.#logger?.info({ url: delivery.url, detail: destination.detail }, 'webhook destination refused');
      return { delivered: false, status: null, error: destination.reason, retry: destination.transient };
    }
    const { host, address, family } = destination;
    const remainingMs = Math.max(1, this.#timeoutMs - (performance.now() - started));
    return new Promise<AttemptResult>((resolve) => {
      let settled = false;
      const settle = (result: AttemptResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(result);
      };
      const request = https.request(
        {
          host,
          port: url.port ? Number(url.port) : 443,
          path: `${url.pathname}${url.search}`,
          method: 'POST',
          agent: this.#agent,
          ...(isIP(host) ? {} : { servername: host }),
          // The connection goes to the address that was checked, never to a fresh DNS answer.
          lookup: (_hostname, options, callback) => {
            if ((options as { all?: boolean }).all)
              (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address, family }]);
            else callback(null, address, family);
          },
          headers: {
            ...delivery.headers,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(delivery.body),
            'user-agent': 'Tenantry-Webhooks/1',
          },
        },
        (response) => {
          response.resume(); // the body is not read, only drained so the connection can be reused
          settle(classify(response.statusCode ?? 0));
        },
      );
      const timer = setTimeout(() => {
        settle({ delivered: false, status: null, error: `timed out after ${this.#timeoutMs / 1000} seconds`, retry: true });
        request.destroy();
      }, remainingMs);
      request.on('error', (error: NodeJS.ErrnoException) => {
        settle({ delivered: false, status: null, error: networkError(error), retry: true });
      });
      request.end(delivery.body);
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}

/** partner-api.md, Receiver response and retry rules. */
function classify(status: number): AttemptResult {
  if (status >= 200 && status < 300) return { delivered: true, status, error: null, retry: false };
  if (status >= 300 && status < 400) return { delivered: false, status, error: `redirect (${status}) not followed`, retry: true };
  if (status === 429 || status >= 500) return { delivered: false, status, error: `receiver answered ${status}`, retry: true };
  return { delivered: false, status, error: `receiver answered ${status}; not retried`, retry: false };
}

/** TLS failures that mean "the receiver's certificate is not trusted", which an operator setting can fix. */
const UNTRUSTED_CERTIFICATE = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_UNTRUSTED',
]);

function networkError(error: NodeJS.ErrnoException): string {
  const code = error.code ?? error.message;
  if (UNTRUSTED_CERTIFICATE.has(code)) {
    return `network error: ${code}: the receiver's certificate is not trusted; use one from a public CA, or ask the operator to trust your CA (TENANTRY_WEBHOOK_CA_FILE)`;
  }
  return `network error: ${code}`;
}
