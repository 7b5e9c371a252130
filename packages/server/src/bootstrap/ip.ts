import ipaddr from 'ipaddr.js';

/** Address, subnet and range math for the bootstrap checks, on ipaddr.js. */
export type Address = ipaddr.IPv4 | ipaddr.IPv6;

export interface Cidr {
  /** The address as written (a host address inside the subnet is allowed, as in `100.65.0.11/16`). */
  address: Address;
  prefix: number;
  text: string;
}

/** An inclusive range of addresses, as Kube-OVN writes them in `excludeIps` (`a..b`), or one address. */
export interface AddressRange {
  first: Address;
  last: Address;
  text: string;
}

/** A dotted-quad IPv4 (no `10.1` or hex shorthands) or an IPv6 address; IPv4-mapped IPv6 becomes IPv4. */
export function parseAddress(text: string): Address | undefined {
  const value = text.trim();
  if (ipaddr.IPv4.isValidFourPartDecimal(value)) return ipaddr.IPv4.parse(value);
  if (ipaddr.IPv6.isValid(value)) {
    const v6 = ipaddr.IPv6.parse(value);
    return v6.isIPv4MappedAddress() ? v6.toIPv4Address() : v6;
  }
  return undefined;
}

export function parseCidr(text: string): Cidr | undefined {
  const [host, prefixText, extra] = text.trim().split('/');
  if (host === undefined || prefixText === undefined || extra !== undefined || !/^\d{1,3}$/.test(prefixText)) return undefined;
  const address = parseAddress(host);
  const prefix = Number(prefixText);
  if (!address || prefix > (address.kind() === 'ipv4' ? 32 : 128)) return undefined;
  return { address, prefix, text: `${address.toString()}/${prefix}` };
}

export function parseRange(text: string): AddressRange | undefined {
  const parts = text.trim().split('..');
  if (parts.length > 2) return undefined;
  const first = parseAddress(parts[0] ?? '');
  const last = parts.length === 2 ? parseAddress(parts[1] ?? '') : first;
  if (!first || !last || first.kind() !== last.kind() || toBigInt(first) > toBigInt(last)) return undefined;
  return { first, last, text: parts.length === 2 ? `${first.toString()}..${last.toString()}` : first.toString() };
}

function toBigInt(address: Address): bigint {
  return address.toByteArray().reduce((value, byte) => (value << 8n) | BigInt(byte), 0n);
}

export function sameAddress(a: Address, b: Address): boolean {
  return a.kind() === b.kind() && toBigInt(a) === toBigInt(b);
}

export function inCidr(address: Address, cidr: Cidr): boolean {
  if (address.kind() !== cidr.address.kind()) return false;
  return address.kind() === 'ipv4'
    ? (address as ipaddr.IPv4).match(cidr.address as ipaddr.IPv4, cidr.prefix)
    : (address as ipaddr.IPv6).match(cidr.address as ipaddr.IPv6, cidr.prefix);
}

export function inRange(address: Address, range: AddressRange): boolean {
  if (address.kind() !== range.first.kind()) return false;
  const value = toBigInt(address);
  return value >= toBigInt(range.first) && value <= toBigInt(range.last);
}

/** The first and last address of a subnet (an IPv4 network's network and broadcast addresses). */
export function subnetBounds(cidr: Cidr): { network: Address; broadcast: Address } {
  const bits = cidr.address.kind() === 'ipv4' ? 32 : 128;
  const host = bits - cidr.prefix;
  const value = toBigInt(cidr.address);
  const network = (value >> BigInt(host)) << BigInt(host);
  const broadcast = network | ((1n << BigInt(host)) - 1n);
  return { network: fromBigInt(network, cidr.address.kind()), broadcast: fromBigInt(broadcast, cidr.address.kind()) };
}

function fromBigInt(value: bigint, kind: 'ipv4' | 'ipv6'): Address {
  const length = kind === 'ipv4' ? 4 : 16;
  const bytes: number[] = [];
  for (let i = length - 1; i >= 0; i--) bytes.push(Number((value >> BigInt(i * 8)) & 0xffn));
  return ipaddr.fromByteArray(bytes);
}

/**
 * Whether an address is routable on the Internet for the topology signals. Private, shared (CGNAT),
 * loopback, link-local and unique-local addresses are not; documentation ranges (RFC 5737, 3849) count as
 * public, so that examples and test fixtures can use them as the public addresses they stand for.
 */
export function isPublic(address: Address): boolean {
  return !['private', 'carrierGradeNat', 'loopback', 'linkLocal', 'uniqueLocal', 'unspecified', 'broadcast', 'multicast'].includes(
    address.range(),
  );
}
