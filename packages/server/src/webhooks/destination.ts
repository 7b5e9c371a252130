import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { refuseInTransaction } from '../infra/db/transactions.ts';

/** Resolves a host name to every address it has (injectable: tests answer what they need). */
export interface Resolver {
  resolve(host: string): Promise<string[]>;
}

export const systemResolver: Resolver = {
  async resolve(host) {
    return (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address);
  },
};

export const WEBHOOK_URL_MAX_LENGTH = 2048;

/** Why a URL can never be a receiver (its shape alone), or undefined when its shape is fine. */
export function urlShapeProblem(raw: string): string | undefined {
  if (raw.length > WEBHOOK_URL_MAX_LENGTH) return `must be at most ${WEBHOOK_URL_MAX_LENGTH} characters`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'is not an absolute URL';
  }
  if (url.protocol !== 'https:') return `must use https (got ${url.protocol.replace(':', '')})`;
  if (url.username || url.password) return 'must not carry credentials (user:password@); authenticate deliveries by their signature';
  if (url.hash) return 'must not have a fragment (#...): it is never sent';
  if (!url.hostname) return 'must name a host';
  return undefined;
}

/** The host as a resolver or an address parser wants it (no IPv6 brackets, no trailing dot). */
export function bareHost(url: URL): string {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return host.endsWith('.') ? host.slice(0, -1) : host;
}

const RANGE_NAMES: Record<string, string> = {
  unspecified: 'an unspecified address',
  broadcast: 'the broadcast address',
  multicast: 'a multicast address',
  linkLocal: 'a link-local address (the cloud metadata address 169.254.169.254 is one)',
  loopback: 'a loopback address',
  carrierGradeNat: 'a carrier-grade NAT (100.64.0.0/10) address',
  private: 'a private (RFC 1918) address',
  reserved: 'a reserved or documentation address',
  uniqueLocal: 'a unique-local (fc00::/7) address',
  ipv4Mapped: 'an IPv4-mapped IPv6 address',
  rfc6145: 'an IPv4-translated IPv6 address',
  rfc6052: 'a NAT64 (64:ff9b::/96) address',
  '6to4': 'a 6to4 (2002::/16) address',
  teredo: 'a Teredo (2001::/32) address',
  deprecatedSiteLocal: 'a site-local (fec0::/10) address',
};

/**
 * Why a receiver may not be at this address, or undefined for a public unicast address. Anything
 * that is not plain public unicast is refused, including addresses that embed an IPv4 address
 * (mapped, compatible, NAT64, 6to4, Teredo), since they can reach a private IPv4 host.
 */
export function refusedAddress(address: string): string | undefined {
  if (!ipaddr.isValid(address)) return 'not an IP address';
  const ip = ipaddr.parse(address);
  const range = ip.range();
  if (range !== 'unicast') return RANGE_NAMES[range] ?? `a special-purpose address (${range})`;
  if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).parts.slice(0, 6).every((part) => part === 0)) {
    return 'an IPv4-compatible IPv6 address';
  }
  return undefined;
}

/**
 * Cloud metadata and host-service endpoints: refused even for a partner allowed private
 * receivers, since they hand out the host's credentials. Link-local ranges hold most of them
 * (169.254.169.254 on AWS, GCP, Azure, OpenStack; 169.254.170.2 for ECS tasks); the others are
 * Azure's WireServer, Alibaba Cloud's metadata service and AWS's IPv6 metadata range.
 */
const HOST_SERVICE_RANGES = ['169.254.0.0/16', 'fe80::/10', '168.63.129.16/32', '100.100.100.200/32', 'fd00:ec2::/32'].map((cidr) =>
  ipaddr.parseCIDR(cidr),
);

/**
 * Where IPv6 carries an IPv4 address to an IPv4 host, and which of its 16 bytes hold it (`invert`:
 * stored with every bit flipped). The local-use NAT64 prefix may embed at any of RFC 6052's
 * positions after its 48 bits, so each is read.
 */
const IPV4_CARRIERS: { cidr: string; at: number[][]; invert?: boolean }[] = [
  { cidr: '::/96', at: [[12, 13, 14, 15]] }, // IPv4-compatible (deprecated)
  { cidr: '::ffff:0:0/96', at: [[12, 13, 14, 15]] }, // IPv4-mapped
  { cidr: '::ffff:0:0:0/96', at: [[12, 13, 14, 15]] }, // IPv4-translated (RFC 6145)
  { cidr: '64:ff9b::/96', at: [[12, 13, 14, 15]] }, // NAT64 well-known prefix (RFC 6052)
  {
    cidr: '64:ff9b:1::/48', // NAT64 local-use prefix (RFC 8215), as /48, /56, /64 or /96
    at: [
      [6, 7, 9, 10],
      [7, 9, 10, 11],
      [9, 10, 11, 12],
      [12, 13, 14, 15],
    ],
  },
  { cidr: '2002::/16', at: [[2, 3, 4, 5]] }, // 6to4 (RFC 3056)
  { cidr: '2001::/32', at: [[4, 5, 6, 7]] }, // Teredo server (RFC 4380)
  { cidr: '2001::/32', at: [[12, 13, 14, 15]], invert: true }, // Teredo client
];
const CARRIER_RANGES = IPV4_CARRIERS.map((carrier) => ({ ...carrier, range: ipaddr.IPv6.parseCIDR(carrier.cidr) }));

/** The IPv4 addresses an IPv6 address carries to an IPv4 host (none for native IPv6). */
export function embeddedIPv4(ip: ipaddr.IPv6): ipaddr.IPv4[] {
  const bytes = ip.toByteArray();
  return CARRIER_RANGES.filter(({ range }) => ip.match(range)).flatMap(({ at, invert }) =>
    at.map((indexes) => new ipaddr.IPv4(indexes.map((i) => (invert ? 0xff ^ (bytes[i] ?? 0) : (bytes[i] ?? 0))))),
  );
}

const inHostServiceRange = (ip: ipaddr.IPv4 | ipaddr.IPv6) =>
  HOST_SERVICE_RANGES.some(([range, bits]) => ip.kind() === range.kind() && ip.match(range, bits));

/**
 * True for a metadata or host-service address, in any spelling: IPv6 that carries one to its IPv4
 * host (mapped, compatible, NAT64, 6to4, Teredo) reaches it as surely as the address itself.
 */
export function isHostServiceAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const ip = ipaddr.process(address);
  if (inHostServiceRange(ip)) return true;
  return ip.kind() === 'ipv6' && embeddedIPv4(ip as ipaddr.IPv6).some(inHostServiceRange);
}

/**
 * What a partner can do about a refused private receiver: the operator's switch, and the certificate it
 * then still needs. Said with every refusal, never with the address a name resolved to (a partner must
 * not learn what names resolve to inside the network).
 */
export const PRIVATE_RECEIVER_HINT =
  'for a receiver on a private network, the operator can allow private receivers for this partner ' +
  '(tenantry partners update <partner-id> --allow-private-webhooks); it must still serve HTTPS with a ' +
  "certificate from a public CA or from a CA the server trusts (the operator's TENANTRY_WEBHOOK_CA_FILE)";

/** Names that always mean this machine (RFC 6761). */
const isLocalhostName = (host: string) => /^(.*\.)?localhost$/i.test(host);

/** The port a URL connects to. */
const portOf = (url: URL) => (url.port ? Number(url.port) : 443);

export type Destination =
  | { ok: true; host: string; address: string; family: 4 | 6 }
  /**
   * `reason` is for the partner and never names a resolved address (that would let a partner map
   * internal names); `detail` is for the server log. `transient`: the name did not resolve now
   * (a delivery retries); otherwise the destination is refused.
   */
  | { ok: false; reason: string; detail: string; transient: boolean };

/**
 * Where a delivery may connect: the URL's host resolved, every address checked, and the one
 * address the connection must use (so a DNS answer cannot change between check and connect).
 * A partner may use private addresses and ports other than 443 only when the operator allowed it
 * (`partners update --allow-private-webhooks`): otherwise delivery errors would make a scanner of
 * internal networks. Metadata endpoints are refused whatever the allowance.
 */
export class DestinationGuard {
  readonly #resolver: Resolver;

  constructor(resolver: Resolver = systemResolver) {
    this.#resolver = resolver;
  }

  async check(url: URL, allowPrivate: boolean, timeoutMs = 5_000): Promise<Destination> {
    refuseInTransaction('DestinationGuard.check');
    const host = bareHost(url);
    // The hint is said whenever the partner is not allowed private receivers, whatever the cause, so
    // its presence tells nothing about what a name resolved to.
    const hint = allowPrivate ? '' : `; ${PRIVATE_RECEIVER_HINT}`;
    const refuse = (detail: string, transient = false): Destination => ({
      ok: false,
      reason: `host ${host} does not resolve to a public address${hint}`,
      detail,
      transient,
    });
    if (!allowPrivate && portOf(url) !== 443) {
      const reason = `port ${portOf(url)} is not allowed: a receiver listens on port 443${hint}`;
      return { ok: false, reason, detail: reason, transient: false };
    }
    let addresses: string[];
    if (isIP(host)) {
      addresses = [host];
    } else {
      if (!allowPrivate && isLocalhostName(host)) return refuse('the name means this machine');
      try {
        addresses = await withTimeout(this.#resolver.resolve(host), timeoutMs);
      } catch (error) {
        return refuse(`resolution failed: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, true);
      }
      if (addresses.length === 0) return refuse('no address', true);
    }
    for (const address of addresses) {
      if (isHostServiceAddress(address)) return refuse(`${address} is a cloud metadata or host-service address`);
      const refused = allowPrivate ? undefined : refusedAddress(address);
      if (refused) return refuse(`${address} is ${refused}`);
    }
    const address = addresses[0] as string;
    return { ok: true, host, address, family: isIP(address) === 6 ? 6 : 4 };
  }
}
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error('timed out'), { code: 'ETIMEOUT' })), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
