/**
 * NVMe Qualified Names: validation and the UUID-based host NQN. NVMe Base 2.0 §4.5 "NVMe Qualified
 * Names"; NVMe-oF 1.1 §7.2 (discovery NQN). Checks follow SPDK `nvmf_nqn_is_valid`, except that
 * domain labels may start with a digit (RFC 1123) and the ":<name>" suffix is optional.
 */
import { Buffer } from 'node:buffer';
import { DISCOVERY_NQN } from './discovery.js';
import { bytesToUuid, isUuid } from './connect.js';

/** Maximum NQN length in bytes of UTF-8 (NVMe Base 2.0 §4.5: 223 bytes). */
export const NQN_MAX_LENGTH = 223;

/** Prefix of UUID-based NQNs. */
export const NQN_UUID_PREFIX = 'nqn.2014-08.org.nvmexpress:uuid:';

/** Result of validateNqn. */
export type NqnValidation = { ok: true } | { ok: false; reason: string };

const DOMAIN_LABEL_MAX = 63;
const LABEL_RE = /^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?$/;

function fail(reason: string): NqnValidation {
  return { ok: false, reason };
}

/**
 * Checks an NQN: non-empty, ≤ 223 bytes of UTF-8, no NUL; then either the well-known discovery
 * NQN, `nqn.2014-08.org.nvmexpress:uuid:<uuid>`, or `nqn.yyyy-mm.<reverse domain>[:<name>]` with a
 * real month and at least one domain label.
 */
export function validateNqn(nqn: string): NqnValidation {
  if (nqn.length === 0) return fail('empty');
  const bytes = Buffer.byteLength(nqn, 'utf8');
  if (bytes > NQN_MAX_LENGTH) return fail(`too long: ${bytes} bytes, at most ${NQN_MAX_LENGTH}`);
  if (nqn.includes('\0')) return fail('contains a NUL character');
  if (nqn === DISCOVERY_NQN) return { ok: true };
  if (!nqn.startsWith('nqn.')) return fail('does not start with "nqn."');
  if (nqn.startsWith(NQN_UUID_PREFIX)) {
    const uuid = nqn.slice(NQN_UUID_PREFIX.length);
    return isUuid(uuid) ? { ok: true } : fail(`invalid UUID after "${NQN_UUID_PREFIX}"`);
  }
  const date = /^nqn\.(\d{4})-(\d{2})\./.exec(nqn);
  if (date === null) return fail('expected "nqn.yyyy-mm." date code');
  const month = Number(date[2]);
  if (month < 1 || month > 12) return fail(`invalid month ${date[2]} in date code`);
  const rest = nqn.slice(date[0].length);
  const colon = rest.indexOf(':');
  const domain = colon === -1 ? rest : rest.slice(0, colon);
  if (domain.length === 0) return fail('missing reverse domain name');
  for (const label of domain.split('.')) {
    if (label.length === 0) return fail('empty domain label');
    if (label.length > DOMAIN_LABEL_MAX) return fail(`domain label longer than ${DOMAIN_LABEL_MAX} characters`);
    if (!LABEL_RE.test(label)) return fail(`invalid domain label "${label}"`);
  }
  if (colon !== -1 && colon === rest.length - 1) return fail('empty name after ":"');
  return { ok: true };
}

/**
 * The names nvmet lets a subsystem or host carry (nvmet_subsys_alloc, nvmet_hosts_make_group): any string of 1..223
 * bytes of UTF-8 without NUL. The discovery NQNs are refused where a subsystem is created (nvmet_subsys_make), not
 * here. validateNqn says whether such a name is also a well-formed NQN; a name that is not is still usable.
 */
export function validateNvmetName(name: string): NqnValidation {
  if (name.length === 0) return fail('empty');
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes > NQN_MAX_LENGTH) return fail(`too long: ${bytes} bytes, at most ${NQN_MAX_LENGTH}`);
  if (name.includes('\0')) return fail('contains a NUL character');
  return { ok: true };
}

/** The UUID-based NQN of a host, `nqn.2014-08.org.nvmexpress:uuid:<uuid>` (lower case). */
export function makeHostNqn(uuid: string | Buffer): string {
  const s = typeof uuid === 'string' ? uuid.toLowerCase() : bytesToUuid(uuid);
  return `${NQN_UUID_PREFIX}${s}`;
}

/** The UUID inside a UUID-based NQN (lower case), or undefined. Hosts conventionally use it as hostid. */
export function uuidFromNqn(nqn: string): string | undefined {
  if (!nqn.startsWith(NQN_UUID_PREFIX)) return undefined;
  const uuid = nqn.slice(NQN_UUID_PREFIX.length);
  return isUuid(uuid) ? uuid.toLowerCase() : undefined;
}
