// Host keys: DH-HMAC-CHAP secrets (nvmet hosts/<nqn>/dhchap_*) and TLS PSKs (TP 8011), parsed once here and kept
// beside the entries as configured, so the live config can be written back. Secrets are never logged or echoed in
// errors.
import type { Buffer } from 'node:buffer';
import type { Logger } from 'pino';
import { InvalidArgumentError } from '../../protocol/index.js';
import { DhchapKeyError, parseDhchapSecret, type DhGroupId, type HashId } from '../../protocol/auth/index.js';
import { DEFAULT_HKDF_ENCODING, TlsKeyError, deriveConcatTlsPsk, parseTlsKey } from '../../protocol/tls/index.js';
import type { HostConfig } from '../model/config.js';
import { DH_GROUP_BY_NAME, HASH_NAMES, type AuthStats, type HostAuth, type HostAuthView } from '../core/auth.js';
import type { TargetCore } from '../core/index.js';
import { TlsKeyStore, type TlsStats } from '../transport/tcp/index.js';
import { checkName } from './config-translation.js';

export const REDACTED = '<redacted>';

/** What a generated PSK of secure channel concatenation arrives as (TargetCore.onGeneratedPsk). */
export interface GeneratedPsk {
  hostnqn: string;
  subnqn: string;
  hashId: number;
  scC: number;
  psks: Buffer[];
}

export class HostKeys {
  readonly #core: TargetCore;
  readonly #log: Logger;
  /** DH-HMAC-CHAP host entries as configured (with their secrets). */
  readonly #dhchap = new Map<string, HostConfig>();
  /** TLS PSKs by host, shared by every TLS port. */
  readonly tls = new TlsKeyStore();
  /** TLS host entries as configured. */
  readonly #tlsHosts = new Map<string, Pick<HostConfig, 'tlsKey' | 'tlsHkdf'>>();

  constructor(core: TargetCore, log: Logger) {
    this.#core = core;
    this.#log = log;
    core.onGeneratedPsk = (e) => this.#installGenerated(e);
  }

  /** Applies to controllers created afterwards; established ones keep the keys they connected with. */
  setHostAuth(h: HostConfig): void {
    checkName(this.#log, 'hosts.nqn', 'host', h.nqn);
    if (h.dhchapKey === undefined) throw new InvalidArgumentError('hosts.dhchapKey', 'is required to enable authentication (use clearHostAuth to disable it)');
    const auth: HostAuth = { hostKey: parseSecret('hosts.dhchapKey', h.dhchapKey) };
    if (h.dhchapCtrlKey !== undefined) auth.ctrlKey = parseSecret('hosts.dhchapCtrlKey', h.dhchapCtrlKey);
    if (h.dhchapHash !== undefined) auth.hashes = namesToIds('hosts.dhchapHash', h.dhchapHash, HASH_NAMES);
    if (h.dhchapDhgroup !== undefined) auth.dhGroups = namesToIds('hosts.dhchapDhgroup', h.dhchapDhgroup, DH_GROUP_BY_NAME);
    this.#core.hostAuth.set(h.nqn, auth);
    this.#dhchap.set(h.nqn, { ...h });
    this.#log.info({ hostnqn: h.nqn, bidirectional: auth.ctrlKey !== undefined }, 'host authentication keys set');
  }

  clearHostAuth(hostnqn: string): void {
    if (!this.#core.hostAuth.delete(hostnqn)) throw new InvalidArgumentError('hostnqn', `no authentication keys for ${hostnqn}`);
    this.#dhchap.delete(hostnqn);
    // Generated PSKs came from these keys: new TLS sessions on them end with the keys (open sessions continue).
    this.tls.dropGenerated(hostnqn);
    this.#log.info({ hostnqn }, 'host authentication keys cleared');
  }

  /** nvmet keys a PSK in the kernel keyring by identity, we by host NQN. */
  setHostTlsKey(h: HostConfig): void {
    checkName(this.#log, 'hosts.nqn', 'host', h.nqn);
    if (h.tlsKey === undefined) throw new InvalidArgumentError('hosts.tlsKey', 'is required to set a TLS key');
    let key;
    try {
      key = parseTlsKey(h.tlsKey);
    } catch (e) {
      if (e instanceof TlsKeyError) throw new InvalidArgumentError('hosts.tlsKey', e.message);
      throw e;
    }
    this.tls.set(h.nqn, key, h.tlsHkdf ?? DEFAULT_HKDF_ENCODING);
    this.#tlsHosts.set(h.nqn, { tlsKey: h.tlsKey, ...(h.tlsHkdf !== undefined ? { tlsHkdf: h.tlsHkdf } : {}) });
    this.#log.info({ hostnqn: h.nqn, hash: key.hash, hkdf: h.tlsHkdf ?? DEFAULT_HKDF_ENCODING }, 'host TLS key set');
  }

  clearHostTlsKey(hostnqn: string): void {
    if (!this.tls.delete(hostnqn)) throw new InvalidArgumentError('hostnqn', `no TLS key for ${hostnqn}`);
    this.#tlsHosts.delete(hostnqn);
    this.#log.info({ hostnqn }, 'host TLS key cleared');
  }

  /**
   * Secure channel concatenation (TP 8018): the TLS identities and PSKs of a generated PSK, one per session-key form
   * (protocol/auth DhchapConcatResult), for the host's reconnect inside TLS. Only SHA-256 is ever negotiated here.
   */
  #installGenerated(e: GeneratedPsk): void {
    const hash = e.hashId === 2 ? 2 : 1;
    const entries = e.psks.map((p) => {
      const d = deriveConcatTlsPsk(hash, p, e.hostnqn, e.subnqn);
      p.fill(0);
      return d;
    });
    this.tls.setGenerated(e.hostnqn, e.subnqn, entries);
    this.#log.info({ hostnqn: e.hostnqn, subnqn: e.subnqn, scC: e.scC, hash: `0${hash}` }, 'secure channel concatenation: generated TLS PSK installed');
  }

  tlsStats(): TlsStats {
    const st = this.tls.stats;
    return { handshakesOk: st.handshakesOk, handshakesFailed: st.handshakesFailed, failuresByReason: { ...st.failuresByReason } };
  }

  listHostAuth(): HostAuthView[] {
    return this.#core.hostAuth.list();
  }

  authStats(): AuthStats {
    return { ...this.#core.hostAuth.stats };
  }

  /**
   * The host entries of the live config (DH-HMAC-CHAP first, TLS keys merged in), or undefined when there are none.
   * Secrets read "<redacted>" unless `includeSecrets` (only for writing the config file back).
   */
  configEntries(includeSecrets: boolean): HostConfig[] | undefined {
    let hosts: HostConfig[] | undefined;
    if (this.#dhchap.size > 0) {
      hosts = [...this.#dhchap.values()].map((h) => {
        if (includeSecrets) return { ...h };
        const r: HostConfig = { ...h, dhchapKey: REDACTED };
        if (h.dhchapCtrlKey !== undefined) r.dhchapCtrlKey = REDACTED;
        return r;
      });
    }
    for (const [nqn, t] of this.#tlsHosts) {
      hosts ??= [];
      let entry = hosts.find((h) => h.nqn === nqn);
      if (entry === undefined) hosts.push((entry = { nqn }));
      entry.tlsKey = includeSecrets ? (t.tlsKey as string) : REDACTED;
      if (t.tlsHkdf !== undefined) entry.tlsHkdf = t.tlsHkdf;
    }
    return hosts;
  }
}

function parseSecret(field: string, secret: string): ReturnType<typeof parseDhchapSecret> {
  try {
    return parseDhchapSecret(secret);
  } catch (e) {
    // DhchapKeyError messages never contain the secret; keep it that way in the wrapper.
    if (e instanceof DhchapKeyError) throw new InvalidArgumentError(field, e.message);
    throw e;
  }
}

function namesToIds<T extends HashId | DhGroupId>(field: string, names: readonly string[], table: Readonly<Record<string, T>>): T[] {
  if (names.length === 0) throw new InvalidArgumentError(field, 'must list at least one value');
  return names.map((n) => {
    const id = table[n];
    if (id === undefined) throw new InvalidArgumentError(field, `unknown value ${JSON.stringify(n)}; use one of ${Object.keys(table).join(', ')}`);
    return id;
  });
}
