import ipaddr from 'ipaddr.js';
import type { FieldProblem } from '../infra/errors/catalogue.ts';

/**
 * Source-address allowlists. Entries are stored normalised (`10.0.0.0/8`,
 * `2001:db8::/32`); a bare address means that address alone.
 */
export function normaliseCidrs(entries: readonly string[]): { cidrs: string[]; problems: FieldProblem[] } {
  const cidrs: string[] = [];
  const problems: FieldProblem[] = [];
  entries.forEach((entry, index) => {
    try {
      const [address, bits] = entry.includes('/') ? ipaddr.parseCIDR(entry) : [ipaddr.parse(entry), undefined];
      const prefix = bits ?? (address.kind() === 'ipv4' ? 32 : 128);
      cidrs.push(`${networkOf(address, prefix)}/${prefix}`);
    } catch {
      problems.push({ in: 'body', field: `allow_cidrs.${index}`, message: `"${entry}" is not an IPv4 or IPv6 address or CIDR` });
    }
  });
  return { cidrs: [...new Set(cidrs)], problems };
}

function networkOf(address: ipaddr.IPv4 | ipaddr.IPv6, prefix: number): string {
  if (address.kind() === 'ipv4') return ipaddr.IPv4.networkAddressFromCIDR(`${address.toString()}/${prefix}`).toString();
  return ipaddr.IPv6.networkAddressFromCIDR(`${address.toString()}/${prefix}`).toString();
}

/** Whether a request's source address falls in an allowlist; an empty list allows every address. */
export function addressAllowed(source: string, cidrs: readonly string[]): boolean {
  if (cidrs.length === 0) return true;
  let address: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    // An IPv4 client on a dual-stack socket arrives as ::ffff:a.b.c.d.
    address = ipaddr.process(source);
  } catch {
    return false;
  }
  return cidrs.some((cidr) => {
    const [network, bits] = ipaddr.parseCIDR(cidr);
    return network.kind() === address.kind() && address.match([network, bits] as never);
  });
}
