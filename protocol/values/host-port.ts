// ADDR:PORT and literal addresses: the one parser for both the config schema (ports, api.listen) and every CLI flag
// that takes ADDR:PORT (target --listen/--api/--advertise, ctl --api). A leaf module (node:net only), so the CLI can
// import it without loading the schema and zod.
import { isIP } from 'node:net';

/** "ipv4" / "ipv6" for a literal address, undefined for anything else (host names are not resolved). */
export function ipFamily(addr: string): 'ipv4' | 'ipv6' | undefined {
  const v = isIP(addr);
  return v === 4 ? 'ipv4' : v === 6 ? 'ipv6' : undefined;
}

/** Parses "ADDR:PORT" with IPv6 in brackets ("[::1]:4420"); undefined when malformed. */
export function parseHostPort(spec: string): { addr: string; port: number; family: 'ipv4' | 'ipv6' } | undefined {
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(spec) ?? /^([^:[\]]+):(\d{1,5})$/.exec(spec);
  if (!m || m[1] === undefined || m[2] === undefined) return undefined;
  const family = ipFamily(m[1]);
  const port = Number(m[2]);
  if (!family || port > 65535) return undefined;
  // Brackets exactly when the address is IPv6 (RFC 3986 host syntax).
  if ((family === 'ipv6') !== spec.startsWith('[')) return undefined;
  return { addr: m[1], port, family };
}
