import type { WebhookEvent } from '../../../sdk/src/index.ts';
import { DELIVERY_TIMEOUT_MS } from '../webhooks/sender.ts';
import { deliveryHeaders } from '../webhooks/service.ts';
import { newSigningSecret, signDelivery } from '../webhooks/signature.ts';
import { CliError } from './operator-client.ts';
import { describeFailure, type PartnerFlags, partnerClient } from './partner-client.ts';

/**
 * `tenantry listen`: a partner's events on a laptop, with no public HTTPS receiver. The events come
 * from the server's event stream (`GET /events/stream`, resumed with Last-Event-ID after a drop) and are
 * POSTed to `--forward-to` signed exactly like a webhook delivery (same headers, same HMAC, same body
 * bytes), with a secret of this session that the command prints: the receiver verifies them with the
 * code it will run in production, `verifyWebhook(rawBody, headers, secret)`.
 */
export interface ListenFlags extends PartnerFlags {
  forwardTo?: string;
  events?: string;
  secret?: string;
  json?: boolean;
}

/** The headers a real delivery carries: the dispatcher's own, and the sender's content type and agent. */
function headersOf(event: WebhookEvent, body: string, secret: string, timestamp: number): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': 'Tenantry-Webhooks/1 (tenantry listen)',
    ...deliveryHeaders(event.id, event.event, timestamp, signDelivery(secret, timestamp, body)),
  };
}

/** `customer.*`, `project.ready`, `*`: the webhook configuration's filter syntax. */
function eventFilter(raw: string | undefined): (name: string) => boolean {
  if (raw === undefined || raw.trim() === '' || raw.trim() === '*') return () => true;
  const patterns = raw.split(',').map((p) => p.trim());
  return (name) => patterns.some((p) => p === name || (p.endsWith('.*') && name.startsWith(p.slice(0, -1))));
}

async function forward(url: string, event: WebhookEvent, secret: string): Promise<{ status: number | null; ms: number; error?: string }> {
  // JSON.stringify of the parsed body gives back the server's bytes: the server wrote them with it.
  const body = JSON.stringify(event);
  const started = performance.now();
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: headersOf(event, body, secret, Math.floor(Date.now() / 1000)),
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS),
    });
    await response.arrayBuffer().catch(() => undefined);
    return { status: response.status, ms: Math.round(performance.now() - started) };
  } catch (error) {
    const err = error as { name?: string; cause?: { code?: string }; message?: string };
    const reason = err.name === 'TimeoutError' ? `timed out after ${DELIVERY_TIMEOUT_MS / 1000} s` : (err.cause?.code ?? err.message);
    return { status: null, ms: Math.round(performance.now() - started), error: String(reason) };
  }
}

/**
 * Started through npm (`npx tenantry listen`, `npm run`), this process's parent is npm's shell, which a
 * signal to npm ends without passing the signal on; started by the launcher on an older Node, its parent
 * is the launcher, which can be killed outright. Either way the listener would run on, an orphan, holding
 * its key. It stops when its parent is gone (it is then adopted: its parent process id changes).
 */
function stopWithParent(stop: AbortController, env: Record<string, string | undefined> = process.env): void {
  if (env.npm_execpath === undefined && env.TENANTRY_LAUNCHER_PID === undefined) return;
  const parent = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch);
    process.stderr.write('tenantry: the command that started listen has ended; stopping\n');
    stop.abort();
  }, 250);
  watch.unref();
  stop.signal.addEventListener('abort', () => clearInterval(watch), { once: true });
}

export async function listen(flags: ListenFlags): Promise<void> {
  const { client, baseUrl } = partnerClient(flags);
  const secret = flags.secret ?? newSigningSecret();
  if (!/^[0-9a-f]{64}$/.test(secret)) throw new CliError('--secret must be 64 lowercase hexadecimal characters', 2);
  if (flags.forwardTo !== undefined && !/^https?:\/\/[^/]/.test(flags.forwardTo)) {
    throw new CliError(`--forward-to must be an http:// or https:// URL, got "${flags.forwardTo}"`, 2);
  }
  const wanted = eventFilter(flags.events);
  const me = await client.auth.whoami().catch((error: unknown) => {
    throw describeFailure(error, baseUrl);
  });
  const json = flags.json === true;
  const say = (line: string, document: Record<string, unknown>) => process.stdout.write(`${json ? JSON.stringify(document) : line}\n`);

  const stop = new AbortController();
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => stop.abort());
  stopWithParent(stop);
  let opened = false;
  let fatal: CliError | undefined;
  const stream = client.events.stream({
    signal: stop.signal,
    onOpen: () => {
      if (opened) {
        process.stderr.write('tenantry: reconnected; events missed meanwhile follow\n');
        return;
      }
      opened = true;
      const target = flags.forwardTo ?? 'this terminal';
      say(`Ready: ${me.token.mode} events of ${me.partner.id} are forwarded to ${target} (Ctrl-C to stop)`, {
        ready: true,
        partner_id: me.partner.id,
        mode: me.token.mode,
        forward_to: flags.forwardTo ?? null,
        signing_secret: secret,
      });
      if (!json) say(`Signing secret of this session: ${secret}  (verifyWebhook(rawBody, headers, secret))`, {});
    },
    onReconnect: ({ error, delayMs }) => {
      if (!opened) {
        // The first connection failed: say why and stop, rather than retry silently.
        fatal = describeFailure(error, baseUrl);
        stop.abort();
        return;
      }
      const reason = error instanceof Error ? error.message : String(error);
      process.stderr.write(`tenantry: the event stream ended (${reason}); reconnecting in ${Math.ceil(delayMs / 1000)} s\n`);
    },
  });

  try {
    for await (const event of stream) {
      if (!wanted(event.event)) continue;
      const time = event.created_at.slice(11, 19);
      if (flags.forwardTo === undefined) {
        say(`${time}  ${event.event.padEnd(28)} ${event.id}  ${JSON.stringify(event.data)}`, { event });
        continue;
      }
      const result = await forward(flags.forwardTo, event, secret);
      // The line says when the event was forwarded (local time) and what the receiver answered.
      const at = new Date();
      const outcome = result.status === null ? `not forwarded: ${result.error}` : `forwarded → ${result.status}`;
      say(`${at.toTimeString().slice(0, 8)}  ${event.event.padEnd(28)} ${event.id}  ${outcome} (${result.ms} ms)`, {
        id: event.id,
        event: event.event,
        forwarded_at: at.toISOString(),
        status: result.status,
        ms: result.ms,
        ...(result.error ? { error: result.error } : {}),
      });
    }
  } catch (error) {
    throw describeFailure(error, baseUrl);
  }
  if (fatal) throw fatal;
}
